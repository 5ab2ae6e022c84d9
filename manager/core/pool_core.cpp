// PoolCore, the task side: submit, dispatch, results, attempts, retries, cancellation,
// timeouts and the queries. The worker side (lifecycle, health, restarts, scaling) is in
// pool_core_workers.cpp; metrics recording in pool_core_metrics.cpp.
#include "core/pool_core.hpp"

#include <algorithm>
#include <chrono>
#include <climits>

#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::retryable;
using detail::to_ns;
using detail::wall_ms;

PoolCore::PoolCore(const PoolOptions& options, WorkerControl& control,
                   std::atomic<std::size_t>& admitted)
    : opts_(options),
      ctl_(control),
      admitted_(admitted),
      dispatcher_(options.dispatch, options.seed),
      rng_(options.seed ^ 0x5a5a5a5a5a5a5a5aull),
      finished_({options.task_records_max, to_ns(options.task_records_max_age),
                 static_cast<std::size_t>(options.task_records_max_bytes)}),
      target_workers_(options.workers) {}

void PoolCore::start(std::int64_t now) {
  clock_ns_ = now;
  for (std::uint32_t i = 0; i < target_workers_; ++i) spawn_worker(now);
}

void PoolCore::submit(TaskPtr task, std::int64_t now) {
  clock_ns_ = now;
  task->max_attempts = 1 + task->opts.retries.value_or(opts_.retries);
  task->timeout_ns = to_ns(task->opts.timeout.value_or(opts_.timeout));
  task->queued_ns = now;
  if (auto ttl = task->opts.queue_ttl ? task->opts.queue_ttl : opts_.queue_ttl) {
    task->expires_ns = now + to_ns(*ttl);
    ++ttl_tasks_;
  }
  ++stats_.submitted;
  ++open_tasks_;
  if (failed_) {
    release_admission(*task);
    finish(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  if (crash_loop_ && task->opts.fail_fast) {
    release_admission(*task);
    finish(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
           "the pool is in crash_loop and the task asked to fail fast");
    return;
  }
  queue_.push(std::move(task));
  dispatch(now);
}

void PoolCore::dispatch(std::int64_t now) {
  // Affinity backlogs first: those tasks were already waiting for their worker.
  for (auto& [id, w] : workers_) {
    if (backlogged_ == 0) break;
    while (!w.backlog.empty() && w.phase == Phase::kReady &&
           w.in_flight.size() < opts_.concurrency) {
      TaskPtr t = std::move(w.backlog.front());
      w.backlog.pop_front();
      --backlogged_;
      assign(w, std::move(t), now);
    }
  }
  if (queue_.empty()) return;
  candidates_.clear();
  std::vector<Worker*>& by_index = candidate_workers_;
  by_index.clear();
  bool any_ready = false;
  for (auto& [id, w] : workers_) {
    // A starting worker is a candidate with no room: affinity keeps its keys for it (they
    // must not move when it becomes ready), the other strategies pass it by.
    // A worker we decided to kill (waiting for its backtrace) gets nothing new.
    if ((w.phase != Phase::kReady && w.phase != Phase::kStarting) || w.kill_reason) continue;
    const bool ready = w.phase == Phase::kReady;
    any_ready |= ready;
    // A worker due for recycling after max_tasks gets no more than it has left to serve.
    std::uint32_t capacity = opts_.concurrency;
    if (opts_.recycle_max_tasks != 0) {
      const std::uint64_t left =
          opts_.recycle_max_tasks > w.tasks_done ? opts_.recycle_max_tasks - w.tasks_done : 0;
      capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(capacity, left));
    }
    candidates_.push_back(
        {id, ready ? static_cast<std::uint32_t>(w.in_flight.size()) : capacity, capacity});
    by_index.push_back(&w);
  }
  if (!any_ready) return;
  while (!queue_.empty()) {
    const TaskPtr& head = *queue_.peek();
    Choice c = dispatcher_.choose(candidates_, head->opts.key);
    if (c.index < 0) break;
    Worker& w = *by_index[c.index];
    TaskPtr t = queue_.pop();
    if (c.must_wait) {
      w.backlog.push_back(std::move(t));
      ++backlogged_;
      continue;
    }
    assign(w, std::move(t), now);
    candidates_[c.index].in_flight++;
  }
}

void PoolCore::assign(Worker& w, TaskPtr task, std::int64_t now) {
  note_dispatch(*task, now);
  release_admission(*task);
  InFlight f{task, task->attempts_ended + 1, now, wall_ms(), now + task->timeout_ns};
  task->state.store(TaskState::kDispatched, std::memory_order_release);
  ctl_.send_task(w.id, *task, f.attempt, f.deadline_ns);
  next_check_ns_ = std::min(next_check_ns_, f.deadline_ns);
  w.in_flight.push_back(std::move(f));
  ++in_flight_total_;
}

void PoolCore::release_admission(TaskRecord& t) {
  if (!t.admitted) return;
  t.admitted = false;
  admitted_.fetch_sub(1, std::memory_order_relaxed);
}

void PoolCore::settle(std::int64_t now) {
  dispatch(now);
  if (!closing_) return;
  for (auto& [id, w] : workers_) maybe_stop(w);
}

void PoolCore::requeue(TaskPtr task) {
  task->state.store(TaskState::kQueued, std::memory_order_release);
  queue_.push_front(std::move(task));
}

bool PoolCore::on_result(WorkerId wid, ipc::ResultMsg& msg, std::int64_t now) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr) return true;  // already gone; nothing to match against
  auto it = std::find_if(w->in_flight.begin(), w->in_flight.end(),
                         [&](const InFlight& f) { return f.task->id == msg.id; });
  if (it == w->in_flight.end()) return false;
  InFlight f = std::move(*it);
  w->in_flight.erase(it);
  --in_flight_total_;
  if (w->cancel_task == msg.id) w->cancel_task = 0;
  if (!f.abandoned) {
    ++w->tasks_done;
    const TaskPtr& t = f.task;
    const std::int32_t pid = ctl_.pid(wid);
    switch (msg.status) {
      case ipc::TaskStatus::kOk: {
        std::lock_guard lock(t->mu);
        t->account.history.push_back(
            {f.attempt, Outcome::kOk, {}, pid, f.started_wall_ms, wall_ms()});
        t->attempts_ended++;
      }
        note_attempt_end(f, Outcome::kOk, now);
        finish(t, TaskState::kCompleted, DeadReason::kNone, std::move(msg.data), {});
        break;
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
  if (opts_.recycle_max_tasks != 0 && w->tasks_done >= opts_.recycle_max_tasks) {
    recycle(*w, "served " + std::to_string(w->tasks_done) + " tasks (recycle.max_tasks)", now);
  }
  maybe_stop(*w);  // a draining worker stops once its ring is empty
  settle(now);
  return true;
}

bool PoolCore::on_progress(WorkerId wid, const ipc::ProgressMsg& msg) {
  Worker* w = find(wid);
  if (w == nullptr) return true;
  for (const InFlight& f : w->in_flight) {
    if (f.task->id != msg.id) continue;
    if (!f.abandoned && f.task->state.load(std::memory_order_relaxed) == TaskState::kDispatched) {
      f.task->state.store(TaskState::kRunning, std::memory_order_release);
    }
    if (!f.abandoned && f.task->opts.on_progress) f.task->opts.on_progress(msg.id, msg.data);
    return true;
  }
  // Progress for a task that just ended can race with nothing (results come after progress
  // in the same ring), so an unknown id is a protocol error.
  return false;
}

std::deque<TaskPtr> PoolCore::take_waiting() {
  std::deque<TaskPtr> left = queue_.take_all();
  while (!retries_.empty()) {
    left.push_back(retries_.top().task);
    retries_.pop();
  }
  for (auto& [id, w] : workers_) {
    for (TaskPtr& t : w.backlog) left.push_back(std::move(t));
    backlogged_ -= w.backlog.size();
    w.backlog.clear();
  }
  return left;
}

std::size_t PoolCore::abandon_all(DeadReason reason, const std::string& why, std::int64_t now) {
  clock_ns_ = now;
  std::size_t abandoned = 0;
  for (const TaskPtr& t : take_waiting()) {
    if (is_terminal(t->state.load(std::memory_order_relaxed))) continue;
    release_admission(*t);
    finish(t, TaskState::kDeadLettered, reason, {}, why);
    ++abandoned;
  }
  for (auto& [wid, w] : workers_) {
    const std::uint64_t started = ctl_.started_task(wid);
    bool any = false;
    for (InFlight& f : w.in_flight) {
      if (f.abandoned || is_terminal(f.task->state.load(std::memory_order_relaxed))) continue;
      f.abandoned = true;  // its worker's exit must not end it a second time
      if (f.task->id == started) {
        std::lock_guard lock(f.task->mu);
        f.task->account.history.push_back(
            {f.attempt, Outcome::kLost, why, ctl_.pid(wid), f.started_wall_ms, wall_ms()});
        f.task->attempts_ended++;
      }
      finish(f.task, TaskState::kDeadLettered, reason, {}, why);
      ++abandoned;
      any = true;
    }
    if (any) {
      w.retiring = true;  // not a crash: no restart is counted
      kill_worker(w, Outcome::kLost, why, 0);
    }
  }
  settle(now);
  return abandoned;
}

void PoolCore::end_attempt(const InFlight& f, Outcome outcome, std::string error, std::int32_t pid,
                           std::int64_t now, std::string backtrace) {
  const TaskPtr& t = f.task;
  {
    std::lock_guard lock(t->mu);
    t->account.history.push_back(
        {f.attempt, outcome, error, pid, f.started_wall_ms, wall_ms(), std::move(backtrace)});
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

void PoolCore::finish(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
                      std::string error, CancelReason cancel) {
  if (is_terminal(task->state.load(std::memory_order_relaxed))) return;
  {
    std::lock_guard lock(task->mu);
    task->account.state = state;
    task->account.reason = reason;
    task->account.cancel_reason = cancel;
    task->account.result = std::move(result);
    if (!error.empty() || state == TaskState::kCompleted) task->account.error = std::move(error);
    if (state == TaskState::kDeadLettered) {
      dead_letters_.push_back(task->account);
      if (dead_letters_.size() > opts_.dead_letter_capacity) dead_letters_.pop_front();
    }
  }
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
  if (task->expires_ns != 0) --ttl_tasks_;
  task->state.store(state, std::memory_order_release);
  task->done.store(1, std::memory_order_release);
  task->done.notify_all();
  --open_tasks_;
  finished_.add(task, clock_ns_);
  if (state == TaskState::kDeadLettered && dead_letter_sink_) dead_letter_sink_(*task);
  emit({PoolEvent::Kind::kTaskEnded, task->id, 0, state, reason, Outcome::kOk, task->attempts_ended,
        task->account.error});
  // The account is final once done is set: nothing writes it again, so the callback reads
  // it in place instead of a copy (readers elsewhere only ever copy it under the lock).
  if (task->opts.on_done) task->opts.on_done(task->account);
}

bool PoolCore::cancel(const TaskPtr& t, std::int64_t now) {
  clock_ns_ = now;
  const std::uint64_t id = t->id;
  const TaskState s = t->state.load(std::memory_order_relaxed);
  if (is_terminal(s)) return false;
  t->cancel_requested = true;
  if (s == TaskState::kQueued) {
    if (TaskPtr q = queue_.remove(id)) release_admission(*q);
    for (auto& [wid, w] : workers_) {
      auto b = std::find(w.backlog.begin(), w.backlog.end(), t);
      if (b != w.backlog.end()) {
        w.backlog.erase(b);
        --backlogged_;
      }
    }
    finish(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while queued",
           CancelReason::kUser);
    return true;
  }
  if (s == TaskState::kRetryWait) {
    // Its heap entry is skipped when it comes due.
    finish(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while waiting to retry",
           CancelReason::kUser);
    return true;
  }
  for (auto& [wid, w] : workers_) {
    for (const InFlight& f : w.in_flight) {
      if (f.task != t) continue;
      ctl_.send_cancel(wid, id);
      w.cancel_task = id;
      w.cancel_deadline_ns = now + to_ns(opts_.cancel_grace);
      next_check_ns_ = std::min(next_check_ns_, w.cancel_deadline_ns);
      return true;
    }
  }
  return true;
}

void PoolCore::observe_running() {
  for (auto& [wid, w] : workers_) {
    if (w.in_flight.empty()) continue;
    const std::uint64_t started = ctl_.started_task(wid);
    if (started == 0) continue;
    if (opts_.cpu_time.count() > 0 && started != w.cpu_task) {
      w.cpu_task = started;  // a new task is running: meter its CPU from here
      w.cpu_base_ns = ctl_.cpu_ns(wid);
    }
    for (const InFlight& f : w.in_flight) {
      if (f.task->id != started) continue;
      if (f.task->state.load(std::memory_order_relaxed) == TaskState::kDispatched) {
        f.task->state.store(TaskState::kRunning, std::memory_order_release);
      }
      break;
    }
  }
}

void PoolCore::on_tick(std::int64_t now) {
  clock_ns_ = now;
  while (!retries_.empty() && retries_.top().due_ns <= now) {
    TaskPtr t = retries_.top().task;
    retries_.pop();
    if (is_terminal(t->state.load(std::memory_order_relaxed))) continue;
    t->state.store(TaskState::kQueued, std::memory_order_release);
    queue_.push(std::move(t));
  }
  if (respawn_due_ns_ != 0 && now >= respawn_due_ns_) {
    respawn_due_ns_ = 0;
    adjust_worker_count(now);
  }
  if (now >= next_check_ns_) check_deadlines(now);
  if (now >= next_sweep_ns_) sweep(now);
  settle(now);
}

void PoolCore::check_deadlines(std::int64_t now) {
  std::int64_t next = INT64_MAX;
  for (auto& [wid, w] : workers_) {
    if (w.kill_reason) continue;
    if (w.phase == Phase::kStarting) {
      const std::int64_t due = w.spawned_ns + to_ns(opts_.init_timeout);
      if (now >= due) {
        kill_worker(
            w, Outcome::kLost,
            "plugin init timed out after " + std::to_string(opts_.init_timeout.count()) + " ms", 0);
        continue;
      }
      next = std::min(next, due);
    }
    const std::uint64_t started = w.in_flight.empty() ? 0 : ctl_.started_task(wid);
    if (w.cancel_task != 0) {
      if (now >= w.cancel_deadline_ns && started == w.cancel_task) {
        kill_worker(w, Outcome::kCancelled, "cancelled: did not stop within the grace period",
                    w.cancel_task);
        continue;
      }
      if (now < w.cancel_deadline_ns) next = std::min(next, w.cancel_deadline_ns);
    }
    for (InFlight& f : w.in_flight) {
      if (f.abandoned) continue;
      if (now < f.deadline_ns) {
        next = std::min(next, f.deadline_ns);
        continue;
      }
      const std::string error =
          "timed out after " + std::to_string(f.task->timeout_ns / kMsNs) + " ms";
      if (f.task->id == started) {
        kill_hung_worker(w, Outcome::kTimedOut, error, f.task->id, now);
        break;
      }
      // Timed out waiting in the ring behind a slower task: withdraw it, keep the worker.
      f.abandoned = true;
      ctl_.send_cancel(wid, f.task->id);
      end_attempt(f, Outcome::kTimedOut, error + " waiting in the worker's ring", ctl_.pid(wid),
                  now);
    }
  }
  if (!retries_.empty()) next = std::min(next, retries_.top().due_ns);
  next_check_ns_ = next;
}

std::int64_t PoolCore::next_deadline() const {
  std::int64_t next = std::min(next_check_ns_, workers_.empty() ? INT64_MAX : next_sweep_ns_);
  if (!retries_.empty()) next = std::min(next, retries_.top().due_ns);
  if (respawn_due_ns_ != 0) next = std::min(next, respawn_due_ns_);
  if (backtraces_awaited_ > 0) {
    for (const auto& [wid, w] : workers_) {
      if (w.backtrace_due_ns != 0) next = std::min(next, w.backtrace_due_ns);
    }
  }
  return next;
}

void PoolCore::close(std::int64_t now) {
  clock_ns_ = now;
  closing_ = true;
  adjust_worker_count(now);
  settle(now);
}

bool PoolCore::idle() const { return open_tasks_ == 0; }

TaskPtr PoolCore::find_task(std::uint64_t id) const {
  if (TaskPtr t = queue_.find(id)) return t;
  for (const RetryEntry& e : retries_.entries()) {
    if (e.task->id == id) return e.task;
  }
  for (const auto& [wid, w] : workers_) {
    for (const InFlight& f : w.in_flight) {
      if (f.task->id == id && !f.abandoned) return f.task;
    }
    for (const TaskPtr& t : w.backlog) {
      if (t->id == id) return t;
    }
  }
  return finished_.find(id);
}

bool PoolCore::finished() const { return closing_ && workers_.empty() && idle(); }

PoolStats PoolCore::stats() const {
  PoolStats s = stats_;
  s.queued = queue_.size();
  s.queued += backlogged_;
  s.in_flight = in_flight_total_;
  s.retry_wait = retries_.size();
  s.workers = static_cast<std::uint32_t>(workers_.size());
  s.target_workers = target_workers_;
  s.dispatch = dispatcher_.strategy();
  s.crash_loop = crash_loop_;
  s.state = failed_       ? "failed"
            : closing_    ? (workers_.empty() ? "closed" : "closing")
            : crash_loop_ ? "crash_loop"
                          : "running";
  return s;
}

}  // namespace sandpool::core
