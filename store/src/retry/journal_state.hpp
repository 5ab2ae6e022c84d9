// The task journal's state in memory (docs/journal.md, "The round log"): every unfinished
// task with its payload, every finished task the retention bounds keep (without it), the
// index by idempotency key, and which rounds of the log still hold a live record. Rebuilt at
// open by replaying the log, then kept by applying each committed transaction's records in
// the order they were written, so that it always equals what a replay would rebuild.
//
// A record is live while the task's state needs it: an unfinished task's records since its
// last whole-task record, a finished task's last record until retention evicts it. A round
// whose records are all dead can go, but only from the head of the log (the oldest round
// first): a newer round may hold a task's end whose older records a replay must not see
// without it. Compaction therefore copies the head's live tasks forward (carry) and deletes
// it.
//
// Not thread-safe: TaskJournal guards it with its state mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sandpool/store/task_journal.hpp>

#include "retry/journal_records.hpp"

namespace sandpool {

class JournalState {
 public:
  struct Bounds {
    std::uint64_t max_finished = 0;        // 0: none
    std::uint64_t max_finished_bytes = 0;  // 0: none
    std::int64_t max_finished_age_ms = 0;  // 0: none
  };
  struct Round {
    std::uint64_t bytes = 0;         // its body's size
    std::uint64_t live_records = 0;  // records still needed
    std::uint64_t live_bytes = 0;    // their size
    std::vector<std::uint64_t> ids;  // tasks it has records of (repeats possible)
  };

  // A round of `bytes` was written; its records are applied next.
  void add_round(std::uint64_t seq, std::uint64_t bytes);
  // The round was deleted from the log (its live records were carried forward or are dead).
  void remove_round(std::uint64_t seq);

  // Applies one record of round `seq`, as replay or a commit meets it.
  void apply(std::uint64_t seq, journal_log::Record& r);
  // A whole-task record: the task as it stands (an accept, an end, a copy carried forward).
  void apply_task(std::uint64_t seq, JournalTask&& t, std::size_t bytes);
  void apply_start(std::uint64_t seq, std::uint64_t id, const Attempt& start, std::size_t bytes);
  void apply_requeue(std::uint64_t seq, std::uint64_t id, std::size_t bytes);
  void apply_attempt(std::uint64_t seq, std::uint64_t id, const Attempt& ended, TaskState next,
                     std::int64_t retry_due_ms, std::size_t bytes);
  // The task's live records now are one copy of it in round `seq` (a carry): its content is
  // unchanged.
  void carried(std::uint64_t seq, std::uint64_t id, std::size_t bytes);
  // After a replay: orders the finished tasks by their end for retention.
  void replayed();

  // Reads.
  const JournalTask* find(std::uint64_t id) const;
  // The task if the journal holds it unfinished, else null.
  const JournalTask* unfinished_task(std::uint64_t id) const;
  // The newest task (by submit time, then id) submitted under `key`, or null.
  const JournalTask* find_by_key(const std::string& key) const;
  std::vector<JournalTask> unfinished(const std::optional<std::string>& pool) const;  // by id
  std::vector<std::string> unfinished_pools() const;                                  // by name
  std::vector<std::uint64_t> ids() const;  // every task held, by id
  std::uint64_t highest() const { return highest_; }
  void raise_highest(std::uint64_t id) { highest_ = std::max(highest_, id); }
  std::uint64_t finished_count() const { return finished_count_; }
  std::uint64_t finished_bytes() const { return finished_bytes_; }

  // Retention: evicts finished tasks beyond any bound, the oldest end first, at most `max`;
  // returns how many.
  std::size_t evict(const Bounds& b, std::int64_t now_ms, std::size_t max);

  // Compaction.
  const std::map<std::uint64_t, Round>& rounds() const { return rounds_; }
  std::uint64_t log_bytes() const { return log_bytes_; }
  std::uint64_t live_bytes() const { return live_bytes_; }
  // The rounds at the head of the log with no live record, oldest first, at most `max`.
  std::vector<std::uint64_t> dead_head(std::size_t max) const;
  // The tasks with a live record in round `seq`, by id.
  std::vector<std::uint64_t> live_in(std::uint64_t seq) const;

 private:
  struct Entry {
    JournalTask task;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> records;  // live: (round, bytes)
  };
  Entry* unfinished_entry(std::uint64_t id);
  void add_record(std::uint64_t seq, std::uint64_t id, Entry& e, std::size_t bytes);
  void drop_records(Entry& e);
  using Tasks = std::unordered_map<std::uint64_t, Entry>;
  // Removes the task and everything that counts it.
  void erase(Tasks::iterator it);
  // A new task's entry (contents unspecified: a reused node keeps its last task's), in a
  // spare node when there is one.
  Tasks::iterator insert_new(std::uint64_t id);
  void unindex_key(const JournalTask& t);

  Tasks tasks_;
  // The nodes of erased tasks, kept (a few thousand) for new ones: every task accepted is a
  // node of about 600 bytes, and allocating each anew cost the journal's writer a tenth of
  // its time in page faults and cache misses once retention evicts as many as arrive.
  std::vector<Tasks::node_type> spare_nodes_;
  std::unordered_map<std::string, std::uint64_t> by_key_;              // key: its newest task
  std::deque<std::pair<std::int64_t, std::uint64_t>> finished_order_;  // (finished_ms, id)
  std::map<std::uint64_t, Round> rounds_;
  std::uint64_t finished_count_ = 0, finished_bytes_ = 0;
  std::uint64_t log_bytes_ = 0, live_bytes_ = 0;
  std::uint64_t highest_ = 0;
};

}  // namespace sandpool
