// PoolCore, the worker side: spawning, readiness, exits and their classification, kills
// (with hung-task backtraces), health sweeps, restart intensity and crash_loop, recycling,
// restarts, scaling and the per-worker view. The task side is in pool_core.cpp.
#include <algorithm>
#include <string>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/log_text.hpp>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMaxFreeRequeues;
using detail::kMsNs;
using detail::to_ns;
using detail::worker_event;

void PoolCore::spawn_worker(std::int64_t now) {
  const WorkerId id = ctl_.spawn();
  Worker w;
  w.id = id;
  w.spawned_ns = now;
  w.generation = generation_;
  w.slot = free_slot();
  if (w.slot >= slot_starts_.size()) slot_starts_.resize(w.slot + 1, 0);
  w.slot_restarts = slot_starts_[w.slot]++;
  workers_.emplace(id, std::move(w));
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerStarted, ctl_.pid(id)));
  next_check_ns_ = std::min(next_check_ns_, now + to_ns(opts_.init_timeout));
}

std::uint32_t PoolCore::free_slot() const {
  std::vector<bool> taken;
  for (const auto& [id, w] : workers_) {
    if (w.phase != Phase::kStarting && w.phase != Phase::kReady) continue;
    if (w.slot >= taken.size()) taken.resize(w.slot + 1, false);
    taken[w.slot] = true;
  }
  std::uint32_t slot = 0;
  while (slot < taken.size() && taken[slot]) ++slot;
  return slot;
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
    if (now < w.backtrace_due_ns && !ctl_.backtrace(wid, ipc::BacktraceRead::kComplete)) continue;
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
  if (std::optional<std::string> bt = ctl_.backtrace(w.id, ipc::BacktraceRead::kWhatArrived)) {
    w.backtrace = std::move(*bt);
    // Worker-written: one escaped line in the log (the account keeps the frames as sent).
    log(2, whose + " backtrace before the kill (" + w.kill_error +
               "): " + log_text(w.backtrace, 2 * ipc::kBacktraceBytes));
  } else {
    log(2, whose + " gave no backtrace within " + std::to_string(opts_.backtrace_grace.count()) +
               " ms (" + w.kill_error + ")");
  }
}

void PoolCore::on_ready(WorkerId wid, std::int64_t now, std::string isolation) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr || w->phase != Phase::kStarting) return;
  w->phase = Phase::kReady;
  w->ready_ns = now;
  w->isolation = std::move(isolation);
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
  // A death charged to a task in the ring costs the others nothing: each such death uses up
  // one of a finite number of attempts, so they cannot loop. Only a death nobody is charged
  // for (the worker claimed to be idle) counts against the tasks it puts back.
  const bool charged = std::any_of(w.in_flight.begin(), w.in_flight.end(), [&](const InFlight& f) {
    return !f.abandoned && f.task->id == running;
  });
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
    } else if (!charged && ++f.task->free_requeues > kMaxFreeRequeues) {
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
    i.slot = w.slot;
    i.restarts = w.slot_restarts;
    i.in_flight = static_cast<std::uint32_t>(w.in_flight.size());
    i.tasks_done = w.tasks_done;
    i.isolation = w.isolation;
    i.uptime_ms = (now - w.spawned_ns) / kMsNs;
    if (w.phase != Phase::kStarting) {
      i.last_beat_ago_ms = std::max<std::int64_t>(0, now / kMsNs - ctl_.heartbeat_ms(id));
    }
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace sandpool::core
