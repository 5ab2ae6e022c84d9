#include "core/pool_core.hpp"

#include <algorithm>
#include <chrono>
#include <climits>

namespace sandpool::core {
namespace {

constexpr std::int64_t kMsNs = 1000000;
// A task put back unstarted from this many dead workers' rings is charged a `lost` attempt
// anyway: the "started" word is worker-writable, so a hostile worker could otherwise keep a
// task from ever running out of attempts.
constexpr std::uint32_t kMaxFreeRequeues = 20;

PoolEvent worker_event(PoolEvent::Kind kind, std::int32_t pid) {
  PoolEvent e;
  e.kind = kind;
  e.pid = pid;
  return e;
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t to_ns(std::chrono::milliseconds ms) { return ms.count() * kMsNs; }

bool retryable(Outcome o, bool sandbox_violation_too) {
  switch (o) {
    case Outcome::kError:
    case Outcome::kTimedOut:
    case Outcome::kLost:
    case Outcome::kResourceLimit:
    case Outcome::kProtocolError:
      return true;
    case Outcome::kSandboxViolation:
      return sandbox_violation_too;
    default:
      return false;
  }
}

}  // namespace

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

void PoolCore::spawn_worker(std::int64_t now) {
  const WorkerId id = ctl_.spawn();
  Worker w;
  w.id = id;
  w.spawned_ns = now;
  workers_.emplace(id, std::move(w));
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerStarted, ctl_.pid(id)));
  next_check_ns_ = std::min(next_check_ns_, now + to_ns(opts_.init_timeout));
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

PoolCore::Worker* PoolCore::find(WorkerId w) {
  auto it = workers_.find(w);
  return it == workers_.end() ? nullptr : &it->second;
}

std::size_t PoolCore::live_workers() const {
  std::size_t n = 0;
  for (const auto& [id, w] : workers_) {
    if (w.phase == Phase::kStarting || w.phase == Phase::kReady) ++n;
  }
  return n;
}

std::size_t PoolCore::ready_workers() const {
  std::size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.phase == Phase::kReady ? 1 : 0;
  return n;
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

void PoolCore::on_worker_error(WorkerId wid, std::string text) {
  if (Worker* w = find(wid)) w->last_error = std::move(text);
}

void PoolCore::on_protocol_error(WorkerId wid, std::string what) {
  if (Worker* w = find(wid)) {
    kill_worker(*w, Outcome::kProtocolError, "protocol_error: " + what, 0);
  }
}

void PoolCore::kill_worker(Worker& w, Outcome why, std::string error, std::uint64_t task_id) {
  if (w.kill_reason) return;  // already on its way out
  w.kill_reason = why;
  w.kill_error = std::move(error);
  w.kill_task = task_id;
  ctl_.kill(w.id);
}

void PoolCore::kill_hung_worker(Worker& w, Outcome why, std::string error, std::uint64_t task_id,
                                std::int64_t now) {
  if (w.kill_reason) return;
  if (opts_.backtrace_grace.count() <= 0 || !ctl_.request_backtrace(w.id)) {
    kill_worker(w, why, std::move(error), task_id);
    return;
  }
  // Decided now, carried out when the answer is in or the grace is over: the sweeps skip
  // a worker with a kill_reason, and the loop keeps serving the others meanwhile.
  w.kill_reason = why;
  w.kill_error = std::move(error);
  w.kill_task = task_id;
  w.backtrace_due_ns = now + to_ns(opts_.backtrace_grace);
  ++backtraces_awaited_;
}

void PoolCore::observe_backtraces(std::int64_t now) {
  if (backtraces_awaited_ == 0) return;
  for (auto& [wid, w] : workers_) {
    if (w.backtrace_due_ns == 0) continue;
    if (now < w.backtrace_due_ns && !ctl_.backtrace(wid)) continue;
    collect_backtrace(w);
    ctl_.kill(wid);
  }
}

void PoolCore::collect_backtrace(Worker& w) {
  const std::int32_t pid = ctl_.pid(w.id);
  const std::string whose =
      "worker " + std::to_string(pid) +
      (w.kill_task != 0 ? " (task " + std::to_string(w.kill_task) + ")" : std::string(" (idle)"));
  w.backtrace_due_ns = 0;
  --backtraces_awaited_;
  if (std::optional<std::string> bt = ctl_.backtrace(w.id)) {
    w.backtrace = std::move(*bt);
    log(2, whose + " backtrace before the kill (" + w.kill_error + "):\n" + w.backtrace);
  } else {
    log(2, whose + " gave no backtrace within " + std::to_string(opts_.backtrace_grace.count()) +
               " ms (" + w.kill_error + ")");
  }
}

void PoolCore::on_ready(WorkerId wid, std::int64_t now) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr || w->phase != Phase::kStarting) return;
  w->phase = Phase::kReady;
  w->ready_ns = now;
  init_failures_ = 0;
  next_sweep_ns_ = std::min(next_sweep_ns_, now + to_ns(opts_.heartbeat_interval));
  // A worker that became ready while the pool shrinks or closes is not needed.
  if (live_workers() > target_workers_) {
    drain_worker(*w);
  }
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerReady, ctl_.pid(wid)));
  settle(now);
  advance_rolling_restart(now);
}

void PoolCore::on_exit(WorkerId wid, const supervision::ExitReport& report, std::int64_t now) {
  clock_ns_ = now;
  auto node = workers_.extract(wid);
  if (node.empty()) return;
  Worker& w = node.mapped();
  const bool was_starting = w.phase == Phase::kStarting;
  const bool asked_to_stop = w.retiring;
  if (w.backtrace_due_ns != 0) collect_backtrace(w);  // it died before we killed it

  // The task inside handle(): the worker's word, believed only for an id in its ring and
  // only from a worker that kept the protocol. Otherwise the oldest task in its ring (the
  // one it runs next, since it runs them in order) is charged.
  std::uint64_t running = w.kill_task != 0 ? w.kill_task : ctl_.started_task(wid);
  const auto oldest = std::find_if(w.in_flight.begin(), w.in_flight.end(),
                                   [](const InFlight& f) { return !f.abandoned; });
  const bool in_ring = std::any_of(w.in_flight.begin(), w.in_flight.end(), [&](const InFlight& f) {
    return !f.abandoned && f.task->id == running;
  });
  // A task we killed it for that is no longer in the ring finished meanwhile (during the
  // backtrace grace): nobody else is charged for it.
  if ((w.kill_reason == Outcome::kProtocolError ||
       (running != 0 && !in_ring && w.kill_task == 0)) &&
      oldest != w.in_flight.end()) {
    running = oldest->task->id;
  }
  supervision::Classified c;
  if (w.kill_reason) {
    c = {*w.kill_reason, w.kill_error};
  } else {
    c = supervision::classify_exit(report);
  }
  std::vector<TaskPtr> never_started;
  for (InFlight& f : w.in_flight) {
    --in_flight_total_;
    if (f.abandoned) continue;
    if (f.task->id == running) {
      if (f.task->cancel_requested) {
        finish(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while running",
               CancelReason::kUser);
      } else {
        end_attempt(f, c.outcome, c.error, report.pid, now,
                    f.task->id == w.kill_task ? std::move(w.backtrace) : std::string());
      }
    } else if (f.task->cancel_requested) {
      finish(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled before it started",
             CancelReason::kUser);
    } else if (++f.task->free_requeues > kMaxFreeRequeues) {
      end_attempt(
          f, Outcome::kLost,
          "its worker died " + std::to_string(f.task->free_requeues) + " times before it started",
          report.pid, now);
    } else {
      never_started.push_back(f.task);  // no attempt counted
    }
  }
  // Back at the front of the queue, in their original order.
  backlogged_ -= w.backlog.size();
  for (auto it = w.backlog.rbegin(); it != w.backlog.rend(); ++it) requeue(std::move(*it));
  for (auto it = never_started.rbegin(); it != never_started.rend(); ++it) requeue(*it);

  if (was_starting) {
    ++init_failures_;
    std::string why = w.kill_reason ? w.kill_error
                      : !w.last_error.empty()
                          ? w.last_error
                          : "worker exited during init: " + describe(report.status);
    failure_ = why;
    if (init_failures_ >= opts_.max_init_failures) {
      enter_failed("plugin init failed " + std::to_string(init_failures_) +
                   " times in a row: " + why);
    } else if (live_workers() < target_workers_) {
      const std::int64_t backoff =
          std::min<std::int64_t>(5000, 100ll << std::min<std::uint32_t>(init_failures_ - 1, 6));
      respawn_due_ns_ = now + backoff * kMsNs;
    }
  } else if (!asked_to_stop) {
    ++stats_.restarts;
    if (c.outcome == Outcome::kLost) ++stats_.lost;
    note_restart(now);
  }
  if (opts_.on_event) {
    const std::string what = c.error.empty() ? describe(report.status) : c.error;
    emit({PoolEvent::Kind::kWorkerExited, running, report.pid, TaskState::kQueued,
          DeadReason::kNone, c.outcome, 0, what});
  }
  adjust_worker_count(now);
  settle(now);
  advance_rolling_restart(now);
}

void PoolCore::enter_failed(std::string why) {
  failed_ = true;
  failure_ = std::move(why);
  respawn_due_ns_ = 0;
  for (const TaskPtr& t : take_waiting()) {
    if (is_terminal(t->state.load(std::memory_order_relaxed))) continue;
    release_admission(*t);
    finish(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
  }
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

void PoolCore::restart_workers(bool rolling, std::int64_t now) {
  clock_ns_ = now;
  if (closing_ || failed_) return;
  for (auto& [wid, w] : workers_) {
    if (w.retiring || w.kill_reason) continue;
    if (rolling) {
      w.restart_pending = true;
      continue;
    }
    log(1, "restarting worker " + std::to_string(ctl_.pid(wid)));
    drain_worker(w);
  }
  rolling_restart_ = rolling;
  adjust_worker_count(now);
  advance_rolling_restart(now);
}

void PoolCore::advance_rolling_restart(std::int64_t now) {
  if (!rolling_restart_ || init_failures_ > 0) return;
  for (const auto& [wid, w] : workers_) {
    if (w.phase == Phase::kStarting) return;  // one replacement at a time
  }
  for (auto& [wid, w] : workers_) {
    if (!w.restart_pending) continue;
    w.restart_pending = false;
    if (w.retiring || w.kill_reason) continue;
    log(1, "rolling restart: replacing worker " + std::to_string(ctl_.pid(wid)));
    drain_worker(w);
    adjust_worker_count(now);
    return;
  }
  rolling_restart_ = false;
  log(1, "rolling restart finished");
}

void PoolCore::adjust_worker_count(std::int64_t now) {
  if (failed_ || respawn_due_ns_ != 0) return;
  const bool work_left = !queue_.empty() || !retries_.empty() || in_flight_total_ > 0;
  if (closing_ && !work_left) return;
  std::size_t live = live_workers();
  std::uint32_t want = target_workers_;
  if (closing_ && want == 0) want = 1;  // accepted work still needs somebody
  while (live < want) {
    spawn_worker(now);
    ++live;
  }
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

void PoolCore::sweep(std::int64_t now) {
  next_sweep_ns_ = now + to_ns(opts_.heartbeat_interval);
  finished_.expire(now);
  const std::int64_t now_ms = now / kMsNs;
  const std::int64_t silent_limit_ms =
      static_cast<std::int64_t>(opts_.missed_heartbeats) * opts_.heartbeat_interval.count();
  for (auto& [wid, w] : workers_) {
    if (w.kill_reason || (w.phase != Phase::kReady && w.phase != Phase::kDraining)) continue;
    const std::uint64_t started = ctl_.started_task(wid);
    // Idle (or between tasks): the task loop must beat. A running handler is bounded by its
    // timeout and cpu_time instead; it beats through progress/heartbeat when it can.
    if (started == 0) {
      const std::int64_t silent_ms = now_ms - ctl_.heartbeat_ms(wid);
      if (silent_ms > silent_limit_ms) {
        ++stats_.heartbeat_kills;
        const std::string why = "worker " + std::to_string(ctl_.pid(wid)) + " missed " +
                                std::to_string(opts_.missed_heartbeats) +
                                " heartbeats (silent for " + std::to_string(silent_ms) +
                                " ms): killed and replaced";
        log(2, why);
        kill_hung_worker(w, Outcome::kLost, why, 0, now);
        continue;
      }
    } else if (opts_.cpu_time.count() > 0 && started == w.cpu_task && w.cpu_base_ns >= 0) {
      const std::int64_t used = ctl_.cpu_ns(wid) - w.cpu_base_ns;
      if (used > to_ns(opts_.cpu_time)) {
        kill_hung_worker(w, Outcome::kResourceLimit,
                         "resource_limit: cpu (" + std::to_string(used / kMsNs) +
                             " ms of CPU, limit " + std::to_string(opts_.cpu_time.count()) + " ms)",
                         started, now);
        continue;
      }
    }
    if (opts_.recycle_max_rss != 0 && !w.retiring) {
      const std::uint64_t rss = ctl_.rss_bytes(wid);
      if (rss > opts_.recycle_max_rss) {
        recycle(w, "RSS " + std::to_string(rss >> 20) + " MiB above recycle.max_rss", now);
      }
    }
  }
  if (ttl_tasks_ > 0) {
    for (const TaskPtr& t : queue_.remove_if([&](const TaskRecord& r) {
           return r.expires_ns != 0 && r.expires_ns <= now && r.attempts_ended == 0;
         })) {
      release_admission(*t);
      ++stats_.expired;
      finish(t, TaskState::kDeadLettered, DeadReason::kExpired, {},
             "expired: queued for " + std::to_string((now - t->queued_ns) / kMsNs) +
                 " ms, past its queue_ttl");
    }
  }
  if (crash_loop_) {
    for (const auto& [wid, w] : workers_) {
      if (w.phase == Phase::kReady && now - w.ready_ns >= to_ns(opts_.stable_after)) {
        crash_loop_ = false;
        crash_restarts_ = 0;
        restart_times_.clear();
        log(1, "left crash_loop: worker " + std::to_string(ctl_.pid(wid)) + " stayed up for " +
                   std::to_string(opts_.stable_after.count()) + " ms");
        break;
      }
    }
  }
}

void PoolCore::recycle(Worker& w, const std::string& why, std::int64_t now) {
  if (w.retiring || w.kill_reason) return;
  ++stats_.recycled;
  log(1, "recycling worker " + std::to_string(ctl_.pid(w.id)) + ": " + why);
  drain_worker(w);
  adjust_worker_count(now);  // its replacement starts now; it stops once its ring is empty
}

void PoolCore::note_restart(std::int64_t now) {
  restart_times_.push_back(now);
  while (!restart_times_.empty() && restart_times_.front() < now - to_ns(opts_.restart_window)) {
    restart_times_.pop_front();
  }
  if (crash_loop_) {
    ++crash_restarts_;
  } else if (restart_times_.size() > opts_.max_restarts) {
    crash_loop_ = true;
    crash_restarts_ = 1;
    log(3, "entered crash_loop: " + std::to_string(restart_times_.size()) +
               " worker restarts within " + std::to_string(opts_.restart_window.count()) +
               " ms; replacements now back off");
    // Tasks that asked to fail fast do not wait the crash loop out.
    for (const TaskPtr& t :
         queue_.remove_if([](const TaskRecord& r) { return r.opts.fail_fast; })) {
      release_admission(*t);
      finish(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
             "the pool entered crash_loop and the task asked to fail fast");
    }
  }
  if (crash_loop_) {
    const std::int64_t backoff_ms = std::min<std::int64_t>(
        opts_.crash_backoff_max.count(), opts_.crash_backoff_base.count()
                                             << std::min<std::uint32_t>(crash_restarts_ - 1, 20));
    respawn_due_ns_ = std::max(respawn_due_ns_, now + backoff_ms * kMsNs);
  }
}

void PoolCore::drain_worker(Worker& w) {
  if (w.phase == Phase::kDraining || w.phase == Phase::kStopping) return;
  w.phase = Phase::kDraining;
  w.retiring = true;
  backlogged_ -= w.backlog.size();
  for (TaskPtr& t : w.backlog) requeue(std::move(t));
  w.backlog.clear();
  maybe_stop(w);
}

void PoolCore::maybe_stop(Worker& w) {
  if (w.phase == Phase::kReady && closing_ && queue_.empty() && retries_.empty() &&
      w.in_flight.empty()) {
    w.phase = Phase::kDraining;
    w.retiring = true;
  }
  if (w.phase == Phase::kDraining && w.in_flight.empty()) {
    w.phase = Phase::kStopping;
    ctl_.send_stop(w.id);
  }
}

void PoolCore::scale(std::uint32_t n, std::int64_t now) {
  clock_ns_ = now;
  target_workers_ = n;
  std::size_t live = live_workers();
  if (live < n) {
    adjust_worker_count(now);
    return;
  }
  // Shrink: drain starting workers first, then idle ones, then the least loaded.
  while (live > n) {
    Worker* pick = nullptr;
    for (auto& [id, w] : workers_) {
      if (w.phase != Phase::kStarting && w.phase != Phase::kReady) continue;
      auto rank = [](const Worker& x) {
        return x.phase == Phase::kStarting ? 0 : 1 + x.in_flight.size();
      };
      if (pick == nullptr || rank(w) < rank(*pick)) pick = &w;
    }
    if (pick == nullptr) break;
    if (pick->phase == Phase::kStarting) {
      pick->phase = Phase::kStopping;
      pick->retiring = true;
      pick->kill_reason = Outcome::kLost;  // not an init failure: we no longer want it
      pick->kill_error = "stopped while starting (scaled down)";
      ctl_.kill(pick->id);
    } else {
      drain_worker(*pick);
    }
    --live;
  }
  settle(now);
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
  s.crash_loop = crash_loop_;
  s.state = failed_       ? "failed"
            : closing_    ? (workers_.empty() ? "closed" : "closing")
            : crash_loop_ ? "crash_loop"
                          : "running";
  return s;
}

std::vector<WorkerInfo> PoolCore::workers(std::int64_t now) const {
  std::vector<WorkerInfo> out;
  for (const auto& [id, w] : workers_) {
    WorkerInfo i;
    i.pid = ctl_.pid(id);
    switch (w.phase) {
      case Phase::kStarting:
        i.state = "starting";
        break;
      case Phase::kReady:
        i.state = w.in_flight.empty() ? "idle" : "busy";
        break;
      case Phase::kDraining:
        i.state = "draining";
        break;
      case Phase::kStopping:
        i.state = "stopping";
        break;
    }
    i.in_flight = static_cast<std::uint32_t>(w.in_flight.size());
    i.tasks_done = w.tasks_done;
    i.uptime_ms = (now - w.spawned_ns) / kMsNs;
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace sandpool::core
