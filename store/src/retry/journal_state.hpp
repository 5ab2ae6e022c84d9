// The task journal's state in memory (docs/journal.md, "The round log"): every unfinished
// task as JournalOpenTasks keeps it (its id, state, shape and live records: its payload and
// the rest of its whole-task record stay in the log), every finished task the retention
// bounds keep (whole, without its payload), the index by idempotency key, and which rounds of
// the log still hold a live record. Rebuilt at open by replaying the log, then kept by
// applying each committed transaction's records in the order they were written, so that it
// always equals what a replay would rebuild: an unfinished task read back is its whole-task
// record, from the round of its first live record, with overlay_steps() over it.
//
// A record is live while the task's state needs it: an unfinished task's records since its
// last whole-task record (so the first is that record), a finished task's last record until
// retention evicts it. A round whose records are all dead can go, but only from the head of
// the log (the oldest round first): a newer round may hold a task's end whose older records a
// replay must not see without it. Compaction therefore copies the head's live tasks forward
// (carry) and deletes it; every task live in the head round has its whole-task record there.
//
// Not thread-safe: TaskJournal guards it with its state mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sandpool/store/task_journal.hpp>

#include "retry/journal_open_tasks.hpp"
#include "retry/journal_records.hpp"

namespace sandpool {

// What an end written whole takes from its task (TaskJournalImpl::write_end_whole): the
// task's pool, type, options and submit time, pointing into the state or into an accept of
// the open transaction. Valid until the state or that accept changes.
struct OpenMeta {
  const std::string* pool = nullptr;
  const std::string* type = nullptr;
  const TaskOptions* options = nullptr;  // without idempotency_key and not_before (below)
  const std::string* idempotency_key = nullptr;
  std::optional<std::chrono::system_clock::time_point> not_before;
  std::int64_t submitted_ms = 0;

  // The task's options whole.
  void options_into(TaskOptions& o) const {
    o = *options;
    o.idempotency_key = *idempotency_key;
    o.not_before = not_before;
  }
};

// An unfinished task as memory has it: the round of its whole-task record, which holds the
// rest of it (payload, options, ...), and what its later records changed.
struct OpenSnapshot {
  std::uint64_t id = 0;
  std::uint64_t seq = 0;
  OpenSteps steps;
};

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
  };

  // A round of `bytes` was written; its records are applied next.
  void add_round(std::uint64_t seq, std::uint64_t bytes);
  // The round was deleted from the log (its live records were carried forward or are dead).
  void remove_round(std::uint64_t seq);

  // Applies one record of round `seq`, as replay or a commit meets it.
  void apply(std::uint64_t seq, journal_log::Record& r);
  // A whole-task record: the task as it stands (an accept, an end, a copy carried forward).
  // An unfinished task's payload is not kept (the record in the log has it).
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
  // Whether the journal holds the task (unfinished, or finished and kept).
  bool holds(std::uint64_t id) const { return open_.find(id) != nullptr || done_.count(id) > 0; }
  // The task if the journal holds it finished, else null.
  const JournalTask* finished_task(std::uint64_t id) const;
  // The pool, type, options and submit time of a task the journal holds unfinished.
  std::optional<OpenMeta> open_meta(std::uint64_t id) const;
  std::optional<OpenSnapshot> open_snapshot(std::uint64_t id) const;
  // Every unfinished task (of `pool` only, when given), by id.
  std::vector<OpenSnapshot> open_snapshots(const std::optional<std::string>& pool) const;
  // What an unfinished task's later records changed (the writer's: no copy), over `t`.
  void overlay_steps(std::uint64_t id, JournalTask& t) const;
  // The newest task (by submit time, then id) submitted under `key`; 0: none.
  std::uint64_t find_key(const std::string& key) const;
  std::vector<std::string> unfinished_pools() const;  // by name
  std::vector<std::uint64_t> ids() const;             // every task held, by id
  std::uint64_t highest() const { return highest_; }
  void raise_highest(std::uint64_t id) { highest_ = std::max(highest_, id); }
  std::uint64_t finished_count() const { return finished_count_; }
  std::uint64_t finished_bytes() const { return finished_bytes_; }
  std::size_t unfinished_count() const { return open_.size(); }

  // Retention: evicts finished tasks beyond any bound, the oldest end first, at most `max`;
  // returns how many.
  std::size_t evict(const Bounds& b, std::int64_t now_ms, std::size_t max);

  // Compaction.
  const std::map<std::uint64_t, Round>& rounds() const { return rounds_; }
  std::uint64_t log_bytes() const { return log_bytes_; }
  std::uint64_t live_bytes() const { return live_bytes_; }
  // The rounds at the head of the log with no live record, oldest first, at most `max`.
  std::vector<std::uint64_t> dead_head(std::size_t max) const;
  // How many of the task's live records are in round `seq` (0: none, or not held).
  std::size_t live_in(std::uint64_t seq, std::uint64_t id) const;

 private:
  // A finished task: whole but for its payload, and its one live record (its last).
  struct Done {
    JournalTask task;
    LiveRecord record;
  };
  using DoneTasks = std::unordered_map<std::uint64_t, Done>;

  void count_record(std::uint64_t seq, std::size_t bytes);
  void uncount_record(LiveRecord r);
  void drop_records(OpenTask& t);
  // Fills `t`'s entry from a whole-task record of an unfinished task.
  void fill_open(OpenTask& e, const JournalTask& t);
  OpenSteps steps_of(const OpenTask& e) const;
  void erase_open(std::uint64_t id);
  void erase_done(DoneTasks::iterator it);
  // A new finished task's entry (contents unspecified: a reused node keeps its last task's),
  // in a spare node when there is one.
  DoneTasks::iterator insert_done(std::uint64_t id);
  void unindex_key(const std::string& key, std::uint64_t id);
  // The task's submit time, if held.
  std::optional<std::int64_t> submitted_ms(std::uint64_t id) const;

  JournalOpenTasks open_;
  DoneTasks done_;
  // The nodes of erased finished tasks, kept (a few thousand) for new ones: allocating each
  // anew cost the journal's writer a tenth of its time in page faults and cache misses once
  // retention evicts as many as arrive.
  std::vector<DoneTasks::node_type> spare_nodes_;
  std::unordered_map<std::string, std::uint64_t> by_key_;              // key: its newest task
  std::deque<std::pair<std::int64_t, std::uint64_t>> finished_order_;  // (finished_ms, id)
  std::map<std::uint64_t, Round> rounds_;
  std::uint64_t finished_count_ = 0, finished_bytes_ = 0;
  std::uint64_t log_bytes_ = 0, live_bytes_ = 0;
  std::uint64_t highest_ = 0;
};

}  // namespace sandpool
