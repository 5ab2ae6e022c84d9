// PoolCore, tasks out: a worker's results and progress, the end of an attempt and what
// follows it (completion, retry with backoff, dead letter, cancellation), ending a task
// (its letter included) and dead-lettering what waits when the pool fails or gives up.
#include <algorithm>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::retryable;

bool PoolCore::on_result(WorkerId wid, ipc::ResultMsg& msg, std::int64_t now) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr) return true;  // already gone; nothing to match against
  auto it = std::find_if(w->ring.begin(), w->ring.end(),
                         [&](const InFlight& f) { return f.task->id == msg.id; });
  if (it == w->ring.end()) return false;
  // A worker answers "cancelled" only for a task the pool asked it to drop; any other is a
  // lie that would end the task as if its submitter had cancelled it.
  if (msg.status == ipc::TaskStatus::kCancelled && it->ask == InFlight::Ask::kNone) return false;
  const bool was_front = it == w->ring.begin();
  InFlight f = std::move(*it);
  if (was_front) {
    w->ring.pop_front();  // the usual case: results come back in the order sent
  } else {
    w->ring.erase(it);
  }
  w->last_work_ns = now;
  --in_flight_total_;
  if (gates_.on()) gates_.left_ring(*f.task);
  if (!f.ended) {
    ++w->tasks_done;
    const TaskPtr& t = f.task;
    const std::int32_t pid = ctl_.pid(wid);
    switch (msg.status) {
      case ipc::TaskStatus::kOk: {
        // Its attempt goes into the history under end_task's lock: one lock per result.
        Attempt ok{f.attempt, Outcome::kOk, {}, pid, f.started_wall_ms, ctl_.wall_ms()};
        t->attempts_ended++;
        note_attempt_end(f, Outcome::kOk, now);
        end_task(t, TaskState::kCompleted, DeadReason::kNone, std::move(msg.data), {},
                 CancelReason::kNone, &ok);
        break;
      }
      case ipc::TaskStatus::kCancelled:
        end_task(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled before it started",
                 CancelReason::kUser);
        break;
      case ipc::TaskStatus::kRetry:
        end_attempt(f, Outcome::kError, msg.error.empty() ? "handler asked for a retry" : msg.error,
                    pid, now);
        break;
      case ipc::TaskStatus::kFail:
        end_attempt(f, Outcome::kFailed, msg.error.empty() ? "handler failed" : msg.error, pid,
                    now);
        break;
      case ipc::TaskStatus::kLimit:  // SP_LIMIT: the handler's own limit, retried like rlimits'
        end_attempt(
            f, Outcome::kResourceLimit,
            msg.error.empty() ? "resource_limit: the handler stopped at its own limit" : msg.error,
            pid, now);
        break;
      case ipc::TaskStatus::kResultTooLarge:
        end_attempt(f, Outcome::kFailed,
                    "result exceeds max_result (" + std::to_string(opts_.max_result) + " bytes)",
                    pid, now);
        break;
    }
  }
  if (was_front && !w->ring.empty()) front_changed(*w, now);
  recycle_if_due(*w, now);
  maybe_stop(*w, now);  // a draining worker stops once its ring is empty
  settle(now);
  return true;
}

bool PoolCore::on_progress(WorkerId wid, const ipc::ProgressMsg& msg) {
  Worker* w = find(wid);
  if (w == nullptr) return true;
  for (const InFlight& f : w->ring) {
    if (f.task->id != msg.id) continue;
    if (!f.ended && f.task->state.load(std::memory_order_relaxed) == TaskState::kDispatched) {
      f.task->state.store(TaskState::kRunning, std::memory_order_release);
    }
    if (auto* progress = f.task->opts.on_progress(); progress != nullptr && !f.ended) {
      (*progress)(msg.id, msg.data);
    }
    return true;
  }
  // Progress for a task that just ended can race with nothing (results come after progress
  // in the same ring), so an unknown id is a protocol error.
  return false;
}

void PoolCore::end_attempt(const InFlight& f, Outcome outcome, std::string error, std::int32_t pid,
                           std::int64_t now, std::string backtrace) {
  const TaskPtr& t = f.task;
  if (t->decided) return;
  {
    MutexLock lock(t->mu());
    t->account().history.push_back(
        {f.attempt, outcome, error, pid, f.started_wall_ms, ctl_.wall_ms(), std::move(backtrace)});
    t->account().error = error;
  }
  t->attempts_ended++;
  emit({PoolEvent::Kind::kAttemptEnded, t->id, pid, TaskState::kQueued, DeadReason::kNone, outcome,
        f.attempt, error});
  note_attempt_end(f, outcome, now);
  if (t->cancel_requested) {
    end_task(t, TaskState::kCancelled, DeadReason::kNone, {}, std::move(error),
             CancelReason::kUser);
    return;
  }
  if (!retryable(outcome, opts_.retry.retry_sandbox_violation)) {
    end_task(t, TaskState::kDeadLettered, DeadReason::kPermanent, {}, std::move(error));
    return;
  }
  if (t->attempts_ended >= t->max_attempts()) {
    end_task(t, TaskState::kDeadLettered, DeadReason::kRetriesExhausted, {}, std::move(error));
    return;
  }
  if (failed_) {  // a retry would wait for a worker that never comes
    end_task(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  ++stats_.retried;
  t->state.store(TaskState::kRetryWait, std::memory_order_release);
  const std::int64_t due = now + retry_delay_ns(*t);
  if (journal_.retrying) {
    Attempt ended;
    {
      MutexLock lock(t->mu());
      ended = t->account().history.back();
    }
    journal_.retrying(*t, ended, ctl_.wall_ms() + (due - now) / kMsNs);
  }
  retries_.push({due, t});
  next_check_ns_ = std::min(next_check_ns_, due);
}

std::int64_t PoolCore::retry_delay_ns(const TaskRecord& t) {
  // Full jitter: uniform in [0, ceiling].
  const std::int64_t ceiling = opts_.retry.ceiling_for(t.attempts_ended).count() * kMsNs;
  if (ceiling <= 0) return 0;
  std::uniform_int_distribution<std::int64_t> jitter(0, ceiling);
  return jitter(rng_);
}

void PoolCore::end_task(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
                        std::string error, CancelReason cancel, Attempt* ended) {
  if (task->decided) {
    if (ended != nullptr) {
      MutexLock lock(task->mu());
      task->account().history.push_back(std::move(*ended));
    }
    return;
  }
  task->decided = true;
  release_admission(*task);
  {
    MutexLock lock(task->mu());
    if (ended != nullptr) task->account().history.push_back(std::move(*ended));
    if (state == TaskState::kCancelled && task->refused) error = task->ack_status().message();
    task->account().state = state;
    task->account().reason = reason;
    task->account().cancel_reason = cancel;
    task->account().result = std::move(result);
    if (!error.empty() || state == TaskState::kCompleted) task->account().error = std::move(error);
    if (state == TaskState::kDeadLettered && dead_letter_sink_) {
      task->account().dead_letter_pending = true;
    }
  }
  if (state == TaskState::kDeadLettered && dead_letter_sink_) {
    ledger_.await_letter(task, reason);
    if (dead_letter_sink_(task)) return;  // on_letter_written() ends it
    (void)ledger_.take_letter(task->id);  // not written: it ends now
    MutexLock lock(task->mu());
    task->account().dead_letter_pending = false;
    state = task->account().state;  // kCancelled when the letter was not written (answered inline)
  } else if (state != TaskState::kDeadLettered && journal_.end) {
    ledger_.await_end(task);
    if (journal_.end(task)) return;  // on_end_written() ends it
    ledger_.drop_last_end();
    MutexLock lock(task->mu());
    state = task->account().state;  // kCancelled when the end was not written (answered inline)
  }
  make_terminal(task, state, state == TaskState::kDeadLettered ? reason : DeadReason::kNone);
}

void PoolCore::on_end_written(std::uint64_t id, std::int64_t now) {
  clock_ns_ = now;
  TaskPtr task = ledger_.take_end(id);
  if (!task) return;
  // Final (only the loop writes it), or reported unwritten by the journal's answer.
  make_terminal(task, task->account().state, DeadReason::kNone);
  settle(now);
}

void PoolCore::on_letter_written(std::uint64_t id, std::int64_t now) {
  clock_ns_ = now;
  auto letter = ledger_.take_letter(id);
  if (!letter) return;
  auto [task, reason] = std::move(*letter);
  TaskState state = TaskState::kDeadLettered;
  {
    MutexLock lock(task->mu());
    task->account().dead_letter_pending = false;
    state = task->account().state;  // kCancelled when its letter did not reach the store
  }
  make_terminal(task, state, state == TaskState::kDeadLettered ? reason : DeadReason::kNone);
  settle(now);
}

void PoolCore::make_terminal(const TaskPtr& task, TaskState state, DeadReason reason) {
  ledger_.record_terminal(task, state, clock_ns_);
  switch (state) {
    case TaskState::kCompleted:
      ++stats_.completed;
      break;
    case TaskState::kDeadLettered:
      ++stats_.dead_lettered;
      break;
    case TaskState::kCancelled:
      ++stats_.cancelled;
      break;
    default:
      break;
  }
  note_terminal(*task, state, reason);
  task->state.store(state, std::memory_order_release);
  task->done.store(1, std::memory_order_release);
  task->done.notify_all();
  if (opts_.on_event) {  // the event carries a copy of the error: made only when heard
    emit({PoolEvent::Kind::kTaskEnded, task->id, 0, state, reason, Outcome::kOk,
          task->attempts_ended, task->account().error});
  }
  // The account is final once done is set: nothing writes it again, so the callback reads
  // it in place instead of a copy (readers elsewhere only ever copy it under the lock).
  if (auto* done = task->opts.on_done()) (*done)(task->account());
}

std::deque<TaskPtr> PoolCore::take_waiting() {
  std::deque<TaskPtr> left = queue_.take_all();
  while (!retries_.empty()) {
    left.push_back(retries_.top().task);
    retries_.pop();
  }
  while (!scheduled_.empty()) {
    left.push_back(scheduled_.top().task);
    scheduled_.pop();
  }
  for (TaskPtr& t : gates_.take_all()) left.push_back(std::move(t));
  for (auto& [id, w] : workers_) {
    for (TaskPtr& t : w.backlog) left.push_back(std::move(t));
    backlogged_ -= w.backlog.size();
    w.backlog.clear();
  }
  return left;
}

std::size_t PoolCore::dead_letter_waiting(DeadReason reason, const std::string& why) {
  std::size_t n = 0;
  for (const TaskPtr& t : take_waiting()) {
    if (t->decided) continue;
    end_task(t, TaskState::kDeadLettered, reason, {}, why);
    ++n;
  }
  return n;
}

std::size_t PoolCore::abandon_all(DeadReason reason, const std::string& why, std::int64_t now) {
  clock_ns_ = now;
  std::size_t abandoned = dead_letter_waiting(reason, why);
  for (auto& [wid, w] : workers_) {
    bool any = false;
    for (std::size_t i = 0; i < w.ring.size(); ++i) {
      InFlight& f = w.ring[i];
      if (f.ended || f.task->decided) continue;
      f.ended = true;  // its worker's exit must not end it a second time
      if (i == 0) {    // the front: running (or about to), so it had an attempt
        MutexLock lock(f.task->mu());
        f.task->account().history.push_back(
            {f.attempt, Outcome::kLost, why, ctl_.pid(wid), f.started_wall_ms, ctl_.wall_ms()});
        f.task->attempts_ended++;
      }
      end_task(f.task, TaskState::kDeadLettered, reason, {}, why);
      ++abandoned;
      any = true;
    }
    if (any) kill_worker(w, KillReason::kShutdown, Outcome::kLost, why, 0, now);
  }
  settle(now);
  return abandoned;
}

std::size_t PoolCore::release_all(const std::string& why, std::int64_t now) {
  clock_ns_ = now;
  std::vector<TaskPtr> left;
  for (TaskPtr& t : take_waiting()) left.push_back(std::move(t));
  for (auto& [wid, w] : workers_) {
    bool any = false;
    for (InFlight& f : w.ring) {
      if (f.ended || f.task->decided) continue;
      f.ended = true;  // its worker's exit must not end it a second time
      // stopped, not failed: no attempt, and its journaled start (if any) undone
      if (f.start_journaled && journal_.requeued) journal_.requeued(*f.task);
      left.push_back(f.task);
      any = true;
    }
    if (any) kill_worker(w, KillReason::kShutdown, Outcome::kLost, why, 0, now);
  }
  std::size_t released = 0;
  for (const TaskPtr& t : left) {
    if (t->decided) continue;
    t->decided = true;
    release_admission(*t);
    {
      MutexLock lock(t->mu());
      t->account().state = TaskState::kCancelled;
      t->account().cancel_reason = CancelReason::kShutdown;
      t->account().error = why;
    }
    make_terminal(t, TaskState::kCancelled,
                  DeadReason::kNone);  // not journaled: it stays open there
    ++released;
  }
  settle(now);
  return released;
}

}  // namespace sandpool::core
