// TaskLedger: a pool's account of its tasks from taken in to terminal, apart from where an open
// one waits (queue, ring, retry heap: PoolCore's): how many are open (and carry a queue TTL),
// those decided dead-lettered whose letter is being written, those ended completed or cancelled
// whose journaled end is being written, and, once terminal, the finished records and the
// recent dead letters. PoolCore decides a task's end; the ledger keeps the books on it.
//
// Thread-safety: none; the pool's loop thread owns it. A task's account is read under its lock
// (TaskRecord::mu), as everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/finished_tasks.hpp"
#include "core/pending_ends.hpp"
#include "core/task_record.hpp"

namespace sandpool::core {

class TaskLedger {
 public:
  TaskLedger(FinishedTaskBounds finished, std::size_t dead_letter_capacity);

  // A reconfigure's bounds: what is over them (or older than the records' age at `now`) goes.
  void set_bounds(FinishedTaskBounds finished, std::size_t dead_letter_capacity, std::int64_t now);
  // Evicts finished records older than their age bound at `now`.
  void expire(std::int64_t now) { finished_.expire(now); }

  // A task taken in (submit, recover): open until made terminal. Reads its expires_ns.
  void open(const TaskRecord& t);
  // Submitted and not yet terminal, letters and ends being written included.
  std::size_t open_tasks() const { return open_; }
  // Open tasks that carry a queue TTL.
  std::size_t ttl_tasks() const { return ttl_; }
  // True iff every open task is only waiting for its letter or end to be written.
  bool only_writes_open() const { return open_ == letters_.size() + ends_.size(); }

  // A task decided dead-lettered whose letter is being written, with its reason.
  void await_letter(const TaskPtr& task, DeadReason reason);
  // Takes back a task's letter await (the letter was not written, or now is); returns the
  // task and its reason, nullopt when none awaits.
  std::optional<std::pair<TaskPtr, DeadReason>> take_letter(std::uint64_t id);
  std::size_t letters_pending() const { return letters_.size(); }

  // A task ended completed or cancelled whose journaled end is being written.
  void await_end(TaskPtr task) { ends_.push(std::move(task)); }
  // Takes back the end await_end() added last (its end was answered at once).
  void drop_last_end() { ends_.pop_last(); }
  // Takes back a task's end await; null when none awaits.
  TaskPtr take_end(std::uint64_t id) { return ends_.take(id); }
  std::size_t ends_pending() const { return ends_.size(); }

  // The task is terminal in `state` at `now`: it is no longer open; its record is kept among
  // the finished, and a dead-lettered one's account among the recent dead letters.
  void record_terminal(const TaskPtr& task, TaskState state, std::int64_t now);
  // The accounts of the latest dead letters, oldest first, at most dead_letter_capacity.
  const std::deque<TaskResult>& dead_letters() const { return dead_letters_; }

  // Returns the task `id` among those awaiting a letter or an end, or the finished (newest
  // record); null when none. O(tasks held).
  TaskPtr find(std::uint64_t id) const;
  // Calls `take` on the tasks awaiting a letter, then an end, then on the finished records
  // newest first while `more()` is true.
  void for_each(const std::function<void(const TaskPtr&)>& take,
                const std::function<bool()>& more) const;

 private:
  std::size_t open_ = 0;
  std::size_t ttl_ = 0;
  std::map<std::uint64_t, std::pair<TaskPtr, DeadReason>> letters_;  // by task id
  PendingEnds ends_;  // in the order their ends were queued
  FinishedTasks finished_;
  std::size_t dead_letter_capacity_;
  std::deque<TaskResult> dead_letters_;
};

}  // namespace sandpool::core
