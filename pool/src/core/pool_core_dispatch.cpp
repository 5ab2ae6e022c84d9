// PoolCore, tasks in: submit, admission, the funnel every task waiting for a worker goes
// through (to_queue), dispatch to the workers' rings and cancellation.
#include <algorithm>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::to_ns;

namespace {

// Queued tasks whose records dispatch prefetches ahead of the head (TaskQueue::prefetch_ahead).
constexpr std::size_t kDispatchAhead = 4;

}  // namespace

void PoolCore::take_in(TaskRecord& t, std::int64_t now) {
  clock_ns_ = now;
  t.submitted_ns = now;
  t.opts.take_defaults(opts_.retries, opts_.timeout, opts_.queue_ttl);
  std::int64_t due = 0;
  if (t.opts.delay()) {
    due = now + to_ns(*t.opts.delay());
  } else if (t.opts.not_before()) {
    // Never due before not_before: the time rounded up, the wall clock read (rounded down)
    // before the steady one the distance is added to.
    const std::int64_t at_ms =
        std::chrono::ceil<std::chrono::milliseconds>(t.opts.not_before()->time_since_epoch())
            .count();
    const std::int64_t ahead_ms = at_ms - ctl_.wall_ms();
    if (ahead_ms > 0) due = ctl_.steady_ns(now) + ahead_ms * detail::kMsNs;
  }
  // A scheduled task waits in the queue from when it is due: queue wait, TTL and end-to-end
  // latency count from there. Its due_ns() is read from it.
  t.queued_ns = std::max(now, due);  // expires_ns() counts from it
  ++stats_.submitted;
  ledger_.open(t);
}

void PoolCore::submit(TaskPtr task, std::int64_t now) {
  take_in(*task, now);
  if (failed_) {
    end_task(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  if (workers_.crash_loop() && task->opts.fail_fast()) {
    end_task(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
             "the pool is in crash_loop and the task asked to fail fast");
    return;
  }
  if (task->due_ns() != 0) return schedule(std::move(task));  // admitted by the Pool at submit
  task->level_since_ns = now;
  task->waiting_since_ns = now;
  queue_.push(std::move(task));  // admitted by the Pool at submit
  note_aging(now);
  dispatch(now);
  note_waiting(now);
  if (batching_) {
    batch_autoscale_ = true;  // end_batch() looks, after its dispatch
  } else if (autoscaler_.due(now)) {
    autoscale(now);
  }
}

void PoolCore::schedule(TaskPtr task) {
  task->state.store(TaskState::kScheduled, std::memory_order_release);
  const std::int64_t due = task->due_ns();
  scheduled_.push({due, std::move(task)});
}

bool PoolCore::release_gates(std::int64_t now) {
  std::vector<TaskPtr> back = gates_.release(now);
  // Held by a rate limit or a cap, it did not wait for a worker: its queue wait starts now.
  for (const TaskPtr& t : back) t->waiting_since_ns = now;
  // Each to the front of its lane: the last first, so that they keep their order.
  for (auto it = back.rbegin(); it != back.rend(); ++it) to_queue(std::move(*it), true, now);
  return !back.empty();
}

std::map<std::string, std::uint32_t> PoolCore::ring_entries_by_type() const {
  std::map<std::string, std::uint32_t> out;
  for (const auto& [id, w] : workers_) {
    for (const InFlight& f : w.ring) ++out[std::string(f.task->type())];
  }
  return out;
}

void PoolCore::release_scheduled(std::int64_t now) {
  while (!scheduled_.empty() && scheduled_.top().due_ns <= now) {
    TaskPtr t = scheduled_.top().task;
    scheduled_.pop();
    if (workers_.crash_loop() && t->opts.fail_fast()) {
      end_task(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
               "the pool is in crash_loop and the task asked to fail fast");
      continue;
    }
    to_queue(std::move(t), false, now);  // skips a task decided meanwhile
  }
}

void PoolCore::admit(TaskRecord& t) {
  if (t.admitted) return;
  t.admitted = true;
  admitted_.fetch_add(1, std::memory_order_relaxed);
  if (t.tenant_counted && tenant_counts_ != nullptr) tenant_counts_->add(t.opts.tenant());
}

void PoolCore::release_admission(TaskRecord& t, std::size_t* deferred) {
  if (!t.admitted) return;
  t.admitted = false;
  if (deferred != nullptr) {
    ++*deferred;
  } else {
    admitted_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (t.tenant_counted && tenant_counts_ != nullptr) tenant_counts_->release(t.opts.tenant());
}

void PoolCore::to_queue(TaskPtr task, bool front, std::int64_t now) {
  if (task->decided) return;
  if (failed_) {
    // Nothing will ever run it: no worker is started in a failed pool.
    end_task(task, TaskState::kDeadLettered, DeadReason::kCrashLoop, {}, failure_);
    return;
  }
  clock_ns_ = now;
  task->state.store(TaskState::kQueued, std::memory_order_release);
  admit(*task);
  if (front) {
    queue_.push_front(std::move(task));  // keeps its level and the time it entered it
  } else {
    task->level = task->opts.priority();
    task->level_since_ns = now;
    task->waiting_since_ns = now;
    queue_.push(std::move(task));
    note_aging(now);
  }
  note_waiting(now);
}

void PoolCore::dispatch(std::int64_t now) {
  if (batching_) {
    batch_dispatch_ = true;
    return;
  }
  if (gates_.on()) {
    flow_wake_ns_ = INT64_MAX;
    if (now >= gates_.next_ns()) release_gates(now);
  }
  // Affinity backlogs first: those tasks were already waiting for their worker.
  for (auto& [id, w] : workers_) {
    if (backlogged_ == 0) break;
    while (!w.backlog.empty() && w.is<Ready>() && w.ring.size() < opts_.concurrency) {
      if (gates_.on() && (gates_.pool_closed(now) || gates_.closed(*w.backlog.front(), now))) {
        flow_wake_ns_ = std::min(flow_wake_ns_, now + detail::kMsNs);  // held: look again
        break;
      }
      TaskPtr t = std::move(w.backlog.front());
      w.backlog.pop_front();
      --backlogged_;
      assign(w, std::move(t), now);
    }
  }
  for (int round = 0;; ++round) {
    dispatch_queue(now);
    // Tasks a gate let through may not have taken its room (dead-lettered at dispatch, or
    // held by another gate): while the queue is empty and tasks are held, look again.
    if (!gates_.on() || !queue_.empty() || gates_.parked() == 0) return;
    if (round == 16) {
      gates_.look_again(now + detail::kMsNs);
      return;
    }
    if (!release_gates(now)) return;
  }
}

void PoolCore::dispatch_queue(std::int64_t now) {
  if (queue_.empty()) return;
  candidates_.clear();
  std::vector<Worker*>& by_index = candidate_workers_;
  by_index.clear();
  // Only affinity (the key's home, full or starting) and a dispatch function (a view of
  // every worker) look at workers without room; the other strategies pass them by, and
  // choose the same worker among those with room alone, in the same id order. So each
  // choice below scans the workers with room, not all of them (issue 37: 128 workers).
  const bool only_room =
      !opts_.dispatch_function && dispatcher_.strategy() != DispatchStrategy::kAffinity;
  bool any_ready = false;
  candidates_frame_cap_ = UINT64_MAX;
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
    const std::uint32_t in_flight = ready ? static_cast<std::uint32_t>(w.ring.size()) : capacity;
    if (only_room && in_flight >= capacity) continue;
    candidates_.push_back({id, in_flight, capacity, w.slot, w.rss_sampled});
    by_index.push_back(&w);
    candidates_frame_cap_ = std::min(candidates_frame_cap_, w.frame_cap);
  }
  if (!any_ready) return;
  // Dispatched tasks leave the admission count together, once this dispatch is over: one
  // write to the count the submitting threads increment, not one per task (the count is
  // only ever compared at submit, which sees a pass's dispatches as one anyway).
  std::size_t released = 0;
  while (!queue_.empty()) {
    queue_.prefetch_ahead(kDispatchAhead);
    const TaskPtr& head = *queue_.peek();
    if (head->payload().size() > opts_.max_payload) {
      // Accepted under a larger max_payload that a reconfigure lowered since: the workers
      // started with the new one would read its frame as ring corruption.
      TaskPtr t = queue_.pop();
      end_task(t, TaskState::kDeadLettered, DeadReason::kPermanent, {},
               "payload of " + std::to_string(t->payload().size()) +
                   " bytes exceeds max_payload (" + std::to_string(opts_.max_payload) +
                   " bytes), lowered after it was accepted");
      continue;
    }
    if (gates_.on()) {
      if (gates_.pool_closed(now)) {  // the pool's rate: nothing goes before a token
        flow_wake_ns_ = gates_.pool_ready_at(now);
        break;
      }
      if (FlowGates::Gate* g = gates_.closed(*head, now)) {
        gates_.park(*g, queue_.pop(), now);  // still queued (admitted), held back
        continue;
      }
    }
    Choice c = choose_for(*head, now);
    if (c.index < 0) break;
    Worker& w = *by_index[c.index];
    TaskPtr t = queue_.pop();
    if (c.must_wait) {
      w.backlog.push_back(std::move(t));  // still waiting: keeps its admission
      ++backlogged_;
      continue;
    }
    assign(w, std::move(t), now, &released);
    candidates_[c.index].in_flight++;
  }
  if (released != 0) admitted_.fetch_sub(released, std::memory_order_relaxed);
}

void PoolCore::assign(Worker& w, TaskPtr task, std::int64_t now, std::size_t* released) {
  note_dispatch(*task, now);
  if (gates_.on()) gates_.dispatched(*task, now);
  release_admission(*task, released);
  InFlight f;
  f.attempt = task->opts.attempts_before() + task->attempts_ended + 1;
  f.dispatched_ns = now;
  w.last_work_ns = now;
  f.started_wall_ms = ctl_.wall_ms();
  f.deadline_ns = now + task->timeout_ns();
  // Its start is journaled once the worker says it started it (observe_running), not here:
  // a task only queued in the ring must not read back `running` after a crash of poold.
  task->state.store(TaskState::kDispatched, std::memory_order_release);
  ctl_.send_task(w.id, *task, f.attempt, f.deadline_ns);
  f.task = std::move(task);  // the caller's handle: no count taken and dropped per dispatch
  next_check_ns_ = std::min(next_check_ns_, f.deadline_ns);
  const bool was_empty = w.ring.empty();
  w.ring.push_back(std::move(f));
  ++in_flight_total_;
  if (was_empty) front_changed(w, now);
}

std::pair<Worker*, InFlight*> PoolCore::find_in_ring(const TaskPtr& t) {
  for (auto& [wid, w] : workers_) {
    for (InFlight& f : w.ring) {
      if (f.task == t && !f.ended) return {&w, &f};
    }
  }
  return {nullptr, nullptr};
}

void PoolCore::recover(RecoveredTask r, std::int64_t now) {
  TaskPtr task = std::move(r.task);
  take_in(*task, now);
  task->admitted = false;  // to_queue() admits it; a retry waits unadmitted
  if (r.running) {
    InFlight f;
    f.task = task;
    f.attempt = r.running->number;
    f.dispatched_ns = now;
    f.started_wall_ms = r.running->started_ms;
    if (r.refused.empty()) {
      end_attempt(f, Outcome::kLost, "poold restarted", r.running->worker_pid, now);
      return;
    }
    MutexLock lock(task->mu());  // its history says it ran; its retry policy is moot
    task->account().history.push_back({f.attempt, Outcome::kLost, "poold restarted",
                                       r.running->worker_pid, f.started_wall_ms, ctl_.wall_ms()});
    task->attempts_ended++;
  }
  if (!r.refused.empty()) {
    end_task(task, TaskState::kDeadLettered, DeadReason::kPermanent, {}, std::move(r.refused));
    return;
  }
  if (r.retry_wait) {
    task->state.store(TaskState::kRetryWait, std::memory_order_release);
    const std::int64_t due = now + std::max<std::int64_t>(0, r.retry_in_ns);
    retries_.push({due, std::move(task)});
    next_check_ns_ = std::min(next_check_ns_, due);
    return;
  }
  if (task->due_ns() != 0 && !failed_) {
    admit(*task);
    return schedule(std::move(task));
  }
  to_queue(std::move(task), false, now);
}

bool PoolCore::cancel(const TaskPtr& t, std::int64_t now) {
  clock_ns_ = now;
  if (t->decided) return false;
  t->cancel_requested = true;
  const TaskState s = t->state.load(std::memory_order_relaxed);
  if (s == TaskState::kQueued) {
    if (!queue_.remove(t->id)) gates_.remove(t);
    for (auto& [wid, w] : workers_) {
      auto b = std::find(w.backlog.begin(), w.backlog.end(), t);
      if (b != w.backlog.end()) {
        w.backlog.erase(b);
        --backlogged_;
      }
    }
    end_task(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while queued",
             CancelReason::kUser);
    return true;
  }
  if (s == TaskState::kScheduled) {
    scheduled_.remove(t);
    end_task(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while scheduled",
             CancelReason::kUser);
    return true;
  }
  if (s == TaskState::kRetryWait) {
    // Its heap entry is skipped when it comes due.
    end_task(t, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while waiting to retry",
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

}  // namespace sandpool::core
