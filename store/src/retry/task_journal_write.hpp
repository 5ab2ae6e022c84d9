// One queued journal write (task_journal.hpp): what the writer thread commits for accept(),
// the records (starts, requeues, attempt ends), and finish(). Private to the journal's sources.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <sandpool/store/task_journal.hpp>

#include "retry/dead_letter_store_impl.hpp"
#include "retry/id_table.hpp"
#include "retry/journal_records.hpp"
#include "retry/journal_state.hpp"
#include "retry/task_journal_impl.hpp"

namespace sandpool {

// Appends one round of records (the writer; and the first open, carrying an older layout's rows).
inline constexpr const char* kInsertRound =
    "INSERT INTO journal_rounds (seq, body) VALUES (?1, ?2)";

struct TaskJournal::Write {
  enum class Kind : std::uint8_t { kAccept, kStart, kRequeue, kAttempt, kFinish };
  // kAccept's own, out of line: a batch is one write among thousands of records a round, and
  // a record is half the size without it (the loop builds them, the writer reads them).
  struct Accept {
    std::vector<JournalTask> tasks;
    // accept(JournalAcceptViews): the batch until the writer takes it, then made into `tasks`
    // (make_tasks()) and released.
    JournalAcceptViews views;
    std::chrono::steady_clock::time_point since;  // when queued
    // Per task, 1 + the index in the round of its kFinish, which this accept writes as a
    // finished row (0: none; empty: none for the whole batch).
    std::vector<std::size_t> ends;
    // reopen(): the letter deleted in the same transaction (its one task is the letter's,
    // reopened under its id); 0 for an accept().
    std::uint64_t letter_id = 0;
  };
  Kind kind = Kind::kAccept;
  TaskState next = TaskState::kQueued;  // kAttempt
  // kAccept: refused, an id of the batch is journaled already (a reopen: the task is open
  // there); a reopen's letter is gone (set while written).
  bool duplicate = false;
  bool letter_gone = false;
  bool full = false;  // kAccept: refused, the journal would hold more than max_unfinished
  // The round's plan (TaskJournalImpl::plan_round), followed only when the whole round is
  // written in one transaction; a write tried alone after a failed round ignores it.
  bool covered = false;  // a later write of the round supersedes this one: not written
  // kStart: the start's number, worker pid and time (an Attempt's fields).
  std::uint32_t start_number = 0;
  std::int32_t start_pid = 0;
  std::int64_t started_ms = 0;
  std::uint64_t task_id = 0;                        // all but kAccept
  std::unique_ptr<Accept> accept;                   // kAccept
  std::unique_ptr<Attempt> ended;                   // kAttempt: the ended attempt
  std::int64_t retry_due_ms = 0;                    // kAttempt into kRetryWait
  std::shared_ptr<const TaskResult> final_account;  // kFinish (final: nobody writes it)
  JournalCommitted on_committed;                    // kAccept, kFinish (may be empty)
  std::int64_t at_ms = 0;                           // wall clock when queued
  std::uint64_t seq = 0;                            // queue order, from 1

  std::size_t task_count() const {
    return accept ? accept->tasks.size() + accept->views.tasks.size() : 0;
  }
  // kAccept of views: makes its JournalTasks (on the writer thread, for the round that writes
  // them) and releases the views with what they kept alive.
  void make_tasks();
  // kStart: the start as an Attempt.
  Attempt start() const {
    Attempt a;
    a.number = start_number;
    a.worker_pid = start_pid;
    a.started_ms = started_ms;
    return a;
  }
};

// plan_round()'s scratch space, kept between rounds so that its tables keep their buckets.
struct TaskJournalImpl::RoundPlan {
  struct At {
    std::size_t write = 0, task = 0;
  };
  IdTable<At> accepted;  // task id: its accept in the round
  IdSet finished;        // tasks whose accept writes their end
  IdSet later;           // tasks with a requeue, attempt end or finish after
};

// What the writer's last round did with the journal's writes, published to the stats (under
// the store's lock) before the callbacks run.
struct TaskJournalImpl::RoundResult {
  std::uint64_t accepted_tasks = 0, refused_batches = 0, refused_tasks = 0, records = 0;
  std::uint64_t commits = 0, commit_us = 0;
  bool failed = false;  // some writes stay taken for a retry
  std::string error;    // the last failure's text
  // The database could not take the round's writes now (full, I/O error, ...): the journal
  // turns failing with this ("storage: ...").
  std::optional<Status> condition;
};

// What the open transaction wrote to the log, applied to the state in this order once it
// commits (TaskJournalImpl::transaction_ended), so that the state always equals a replay.
struct TaskJournalImpl::Tx {
  struct Item {
    enum class Kind : std::uint8_t {
      kAccepted,  // taken_[write].tasks[task], moved into the state
      kWhole,     // wholes[whole]: a task's end (or an accept with its end)
      kStep,      // taken_[write]: a start, requeue or attempt end
      kCarried,   // task `id`'s live records are now this copy
    };
    Kind kind = Kind::kAccepted;
    std::uint64_t seq = 0;  // the round it is in
    std::size_t bytes = 0;
    std::size_t write = 0, task = 0, whole = 0;
    std::uint64_t id = 0;
  };
  std::vector<Item> items;
  std::vector<JournalTask> wholes;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> rounds;  // (seq, bytes) appended
  std::vector<std::uint64_t> deleted;                           // rounds deleted
  std::uint64_t first_seq = 0;  // next round seq when the transaction began writing
  std::uint64_t next_seq = 0;   // the seq the body being written will get
  std::string body;             // being written
  journal_log::BodyWriter writer;
  bool open = false;  // a body was begun
  // Tasks this transaction accepts (their accept, in taken_) and ends, for the records after.
  IdTable<const JournalTask*> accepted;
  IdSet ended;
  std::uint64_t highest = 0;  // the highest id of those, 0 when none
  std::uint64_t carried = 0;  // tasks carried forward

  // The task's pool, type, options and submit time if this transaction sees it unfinished
  // (accepted by it, or unfinished in the state and not ended by it), else nullopt.
  std::optional<OpenMeta> open_task(const JournalState& st, std::uint64_t id) const;
  // Appends one record through append(BodyWriter&) and returns its size.
  template <typename Append>
  std::size_t append(Append fill) {
    if (!open) {
      writer.reset(&body);
      open = true;
    }
    const std::size_t before = body.size();
    fill(writer);
    return body.size() - before;
  }
};

// Reads round `seq` of the log on `db` and calls on_task for each whole-task record in it, in
// the order written (task_journal_readback.cpp). kNotFound when the round is not in the log
// (compaction deleted it); kInternal when its body is unreadable.
Status read_round_tasks(sqlite::SqliteDb& db, std::uint64_t seq,
                        const std::function<void(JournalTask&)>& on_task);

// The kept bytes of a finished task: its result, error and attempts (their fixed columns
// counted as 48 bytes each).
std::uint64_t kept_bytes(const TaskResult& t);

}  // namespace sandpool
