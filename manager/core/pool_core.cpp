// PoolCore, the task side: submit, admission, dispatch, the queue funnel, ending tasks
// (letters included), cancellation and the queries. Results and attempts are in
// pool_core_tasks.cpp; the worker side (lifecycle, exits, restarts, scaling) in
// pool_core_workers.cpp; deadlines and health sweeps in pool_core_health.cpp; metrics
// recording in pool_core_metrics.cpp.
#include "core/pool_core.hpp"

#include <algorithm>
#include <climits>

#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::to_ns;

namespace {

supervision::RestartIntensity::Limits intensity_limits(const PoolOptions& o) {
  return {o.max_restarts, o.restart_window, o.crash_backoff_base, o.crash_backoff_max,
          o.stable_after};
}

}  // namespace

PoolCore::PoolCore(const PoolOptions& options, WorkerControl& control,
                   std::atomic<std::size_t>& admitted)
    : opts_(options),
      ctl_(control),
      admitted_(admitted),
      dispatcher_(options.dispatch, options.seed),
      rng_(options.seed ^ 0x5a5a5a5a5a5a5a5aull),
      intensity_(intensity_limits(options)),
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
    finish(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  if (intensity_.crash_loop() && task->opts.fail_fast) {
    finish(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
           "the pool is in crash_loop and the task asked to fail fast");
    return;
  }
  queue_.push(std::move(task));  // admitted by the Pool at submit
  dispatch(now);
}

void PoolCore::admit(TaskRecord& t) {
  if (t.admitted) return;
  t.admitted = true;
  admitted_.fetch_add(1, std::memory_order_relaxed);
}

void PoolCore::release_admission(TaskRecord& t) {
  if (!t.admitted) return;
  t.admitted = false;
  admitted_.fetch_sub(1, std::memory_order_relaxed);
}

void PoolCore::to_queue(TaskPtr task, bool front, std::int64_t now) {
  if (task->decided) return;
  if (failed_) {
    // Nothing will ever run it: no worker is started in a failed pool.
    finish(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  clock_ns_ = now;
  task->state.store(TaskState::kQueued, std::memory_order_release);
  admit(*task);
  if (front) {
    queue_.push_front(std::move(task));
  } else {
    queue_.push(std::move(task));
  }
}

void PoolCore::dispatch(std::int64_t now) {
  // Affinity backlogs first: those tasks were already waiting for their worker.
  for (auto& [id, w] : workers_) {
    if (backlogged_ == 0) break;
    while (!w.backlog.empty() && w.is<Ready>() && w.ring.size() < opts_.concurrency) {
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
    if (!w.live()) continue;
    const bool ready = w.is<Ready>();
    any_ready |= ready;
    // A worker due for recycling after max_tasks gets no more than it has left to serve.
    std::uint32_t capacity = opts_.concurrency;
    if (opts_.recycle_max_tasks != 0) {
      const std::uint64_t left =
          opts_.recycle_max_tasks > w.tasks_done ? opts_.recycle_max_tasks - w.tasks_done : 0;
      capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(capacity, left));
    }
    candidates_.push_back(
        {id, ready ? static_cast<std::uint32_t>(w.ring.size()) : capacity, capacity});
    by_index.push_back(&w);
  }
  if (!any_ready) return;
  while (!queue_.empty()) {
    const TaskPtr& head = *queue_.peek();
    if (head->payload.size() > opts_.max_payload) {
      // Accepted under a larger max_payload that a reconfigure lowered since: the workers
      // started with the new one would read its frame as ring corruption.
      TaskPtr t = queue_.pop();
      finish(t, TaskState::kDeadLettered, DeadReason::kPermanent, {},
             "payload of " + std::to_string(t->payload.size()) + " bytes exceeds max_payload (" +
                 std::to_string(opts_.max_payload) + " bytes), lowered after it was accepted");
      continue;
    }
    Choice c = choose_for(*head);
    if (c.index < 0) break;
    Worker& w = *by_index[c.index];
    TaskPtr t = queue_.pop();
    if (c.must_wait) {
      w.backlog.push_back(std::move(t));  // still waiting: keeps its admission
      ++backlogged_;
      continue;
    }
    assign(w, std::move(t), now);
    candidates_[c.index].in_flight++;
  }
}

Choice PoolCore::choose_for(const TaskRecord& t) {
  bool all_fit = true;
  for (const Worker* w : candidate_workers_) all_fit &= t.payload.size() <= w->frame_cap;
  if (all_fit) return dispatcher_.choose(candidates_, t.opts.key);
  // Some workers' regions were sized for a smaller max_payload (a reconfigure raised it while
  // they still run): they must not get this task, whose frame they would read as corruption.
  std::vector<Candidate> fit;
  std::vector<int> index;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    if (t.payload.size() > candidate_workers_[i]->frame_cap) continue;
    fit.push_back(candidates_[i]);
    index.push_back(static_cast<int>(i));
  }
  Choice c = dispatcher_.choose(fit, t.opts.key);
  if (c.index >= 0) c.index = index[static_cast<std::size_t>(c.index)];
  return c;
}

void PoolCore::assign(Worker& w, TaskPtr task, std::int64_t now) {
  note_dispatch(*task, now);
  release_admission(*task);
  InFlight f;
  f.task = task;
  f.attempt = task->attempts_ended + 1;
  f.dispatched_ns = now;
  f.started_wall_ms = ctl_.wall_ms();
  f.deadline_ns = now + task->timeout_ns;
  task->state.store(TaskState::kDispatched, std::memory_order_release);
  ctl_.send_task(w.id, *task, f.attempt, f.deadline_ns);
  next_check_ns_ = std::min(next_check_ns_, f.deadline_ns);
  const bool was_empty = w.ring.empty();
  w.ring.push_back(std::move(f));
  ++in_flight_total_;
  if (was_empty) front_changed(w, now);
}

void PoolCore::settle(std::int64_t now) {
  dispatch(now);
  if (!closing_) return;
  for (auto& [id, w] : workers_) maybe_stop(w, now);
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

std::size_t PoolCore::dead_letter_waiting(DeadReason reason, const std::string& why) {
  std::size_t n = 0;
  for (const TaskPtr& t : take_waiting()) {
    if (t->decided) continue;
    finish(t, TaskState::kDeadLettered, reason, {}, why);
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
        std::lock_guard lock(f.task->mu);
        f.task->account.history.push_back(
            {f.attempt, Outcome::kLost, why, ctl_.pid(wid), f.started_wall_ms, ctl_.wall_ms()});
        f.task->attempts_ended++;
      }
      finish(f.task, TaskState::kDeadLettered, reason, {}, why);
      ++abandoned;
      any = true;
    }
    if (any) kill_worker(w, KillReason::kShutdown, Outcome::kLost, why, 0, now);
  }
  settle(now);
  return abandoned;
}

void PoolCore::finish(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
                      std::string error, CancelReason cancel) {
  if (task->decided) return;
  task->decided = true;
  release_admission(*task);
  {
    std::lock_guard lock(task->mu);
    task->account.state = state;
    task->account.reason = reason;
    task->account.cancel_reason = cancel;
    task->account.result = std::move(result);
    if (!error.empty() || state == TaskState::kCompleted) task->account.error = std::move(error);
    if (state == TaskState::kDeadLettered && dead_letter_sink_) {
      task->account.dead_letter_pending = true;
    }
  }
  if (state == TaskState::kDeadLettered && dead_letter_sink_) {
    letters_pending_.emplace(task->id, std::make_pair(task, reason));
    if (dead_letter_sink_(task)) return;  // on_letter_written() ends it
    letters_pending_.erase(task->id);
    std::lock_guard lock(task->mu);
    task->account.dead_letter_pending = false;
  }
  complete(task, state, reason);
}

void PoolCore::on_letter_written(std::uint64_t id, std::int64_t now) {
  clock_ns_ = now;
  auto it = letters_pending_.find(id);
  if (it == letters_pending_.end()) return;
  auto [task, reason] = std::move(it->second);
  letters_pending_.erase(it);
  {
    std::lock_guard lock(task->mu);
    task->account.dead_letter_pending = false;
  }
  complete(task, TaskState::kDeadLettered, reason);
  settle(now);
}

void PoolCore::complete(const TaskPtr& task, TaskState state, DeadReason reason) {
  if (state == TaskState::kDeadLettered) {
    std::lock_guard lock(task->mu);
    dead_letters_.push_back(task->account);
    if (dead_letters_.size() > opts_.dead_letter_capacity) dead_letters_.pop_front();
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
  emit({PoolEvent::Kind::kTaskEnded, task->id, 0, state, reason, Outcome::kOk, task->attempts_ended,
        task->account.error});
  // The account is final once done is set: nothing writes it again, so the callback reads
  // it in place instead of a copy (readers elsewhere only ever copy it under the lock).
  if (task->opts.on_done) task->opts.on_done(task->account);
}

std::pair<Worker*, InFlight*> PoolCore::find_in_ring(const TaskPtr& t) {
  for (auto& [wid, w] : workers_) {
    for (InFlight& f : w.ring) {
      if (f.task == t && !f.ended) return {&w, &f};
    }
  }
  return {nullptr, nullptr};
}

bool PoolCore::cancel(const TaskPtr& t, std::int64_t now) {
  clock_ns_ = now;
  if (t->decided) return false;
  t->cancel_requested = true;
  const TaskState s = t->state.load(std::memory_order_relaxed);
  if (s == TaskState::kQueued) {
    queue_.remove(t->id);
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
  auto [w, f] = find_in_ring(t);
  if (f == nullptr || f->ask != InFlight::Ask::kNone) return true;
  f->ask = InFlight::Ask::kCancel;
  f->asked_ns = now;
  ctl_.send_cancel(w->id, t->id);  // drops it if the worker has not started it
  if (f == &w->ring.front()) {
    ctl_.raise_cancel_flag(w->id, t->id);
    next_check_ns_ = std::min(next_check_ns_, now + to_ns(opts_.cancel_grace));
  }
  return true;
}

void PoolCore::close(std::int64_t now) {
  clock_ns_ = now;
  closing_ = true;
  adjust_worker_count(now);
  settle(now);
}

bool PoolCore::idle() const { return open_tasks_ == 0; }

bool PoolCore::finished() const {
  // Letters still being written do not hold the loop: the store owns them now, and
  // on_letter_written() still ends their tasks once they are written.
  return closing_ && workers_.empty() && open_tasks_ == letters_pending_.size();
}

TaskPtr PoolCore::find_task(std::uint64_t id) const {
  if (TaskPtr t = queue_.find(id)) return t;
  for (const RetryEntry& e : retries_.entries()) {
    if (e.task->id == id && !e.task->decided) return e.task;
  }
  for (const auto& [wid, w] : workers_) {
    for (const InFlight& f : w.ring) {
      if (f.task->id == id && !f.ended) return f.task;
    }
    for (const TaskPtr& t : w.backlog) {
      if (t->id == id) return t;
    }
  }
  if (auto it = letters_pending_.find(id); it != letters_pending_.end()) return it->second.first;
  return finished_.find(id);
}

PoolStats PoolCore::stats() const {
  PoolStats s = stats_;
  s.queued = queue_.size();
  s.queued += backlogged_;
  s.in_flight = in_flight_total_;
  s.retry_wait = retries_.size();
  s.letters_pending = letters_pending_.size();
  s.workers = static_cast<std::uint32_t>(workers_.size());
  s.target_workers = target_workers_;
  s.dispatch = dispatcher_.strategy();
  s.crash_loop = intensity_.crash_loop();
  s.state = failed_                   ? "failed"
            : closing_                ? (workers_.empty() ? "closed" : "closing")
            : intensity_.crash_loop() ? "crash_loop"
                                      : "running";
  return s;
}

}  // namespace sandpool::core
