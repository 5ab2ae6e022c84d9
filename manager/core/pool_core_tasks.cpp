// PoolCore, attempts: a worker's results and progress, the end of an attempt and what
// follows it (completion, retry with backoff, dead letter, cancellation).
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
  w->ring.erase(it);
  --in_flight_total_;
  if (!f.ended) {
    ++w->tasks_done;
    const TaskPtr& t = f.task;
    const std::int32_t pid = ctl_.pid(wid);
    switch (msg.status) {
      case ipc::TaskStatus::kOk: {
        {
          std::lock_guard lock(t->mu);
          t->account.history.push_back(
              {f.attempt, Outcome::kOk, {}, pid, f.started_wall_ms, ctl_.wall_ms()});
        }
        t->attempts_ended++;
        note_attempt_end(f, Outcome::kOk, now);
        finish(t, TaskState::kCompleted, DeadReason::kNone, std::move(msg.data), {});
        break;
      }
      case ipc::TaskStatus::kCancelled:
        finish(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled before it started",
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
    if (!f.ended && f.task->opts.on_progress) f.task->opts.on_progress(msg.id, msg.data);
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
    std::lock_guard lock(t->mu);
    t->account.history.push_back(
        {f.attempt, outcome, error, pid, f.started_wall_ms, ctl_.wall_ms(), std::move(backtrace)});
    t->account.error = error;
  }
  t->attempts_ended++;
  emit({PoolEvent::Kind::kAttemptEnded, t->id, pid, TaskState::kQueued, DeadReason::kNone, outcome,
        f.attempt, error});
  note_attempt_end(f, outcome, now);
  if (t->cancel_requested) {
    finish(t, TaskState::kCancelled, DeadReason::kNone, {}, std::move(error), CancelReason::kUser);
    return;
  }
  if (!retryable(outcome, opts_.retry.retry_sandbox_violation)) {
    finish(t, TaskState::kDeadLettered, DeadReason::kPermanent, {}, std::move(error));
    return;
  }
  if (t->attempts_ended >= t->max_attempts) {
    finish(t, TaskState::kDeadLettered, DeadReason::kRetriesExhausted, {}, std::move(error));
    return;
  }
  if (failed_) {  // a retry would wait for a worker that never comes
    finish(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  ++stats_.retried;
  t->state.store(TaskState::kRetryWait, std::memory_order_release);
  const std::int64_t due = now + retry_delay_ns(*t);
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

}  // namespace sandpool::core
