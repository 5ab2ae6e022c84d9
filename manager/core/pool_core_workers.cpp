// PoolCore, the worker side: spawning, readiness, kills (with hung-task backtraces), exits
// and who pays for them, restart intensity and crash_loop, draining and stopping,
// recycling, restarts, scaling and the per-worker view.
#include <algorithm>
#include <string>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/log_text.hpp>

#include "core/death_charge.hpp"
#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMaxFreeRequeues;
using detail::kMsNs;
using detail::to_ns;
using detail::worker_event;

std::string_view to_string(KillReason r) {
  switch (r) {
    case KillReason::kInitTimeout:
      return "init_timeout";
    case KillReason::kTaskTimeout:
      return "task_timeout";
    case KillReason::kCpuLimit:
      return "cpu_limit";
    case KillReason::kCancelIgnored:
      return "cancel_ignored";
    case KillReason::kWithdrawalIgnored:
      return "withdrawal_ignored";
    case KillReason::kMissedHeartbeats:
      return "missed_heartbeats";
    case KillReason::kProtocolError:
      return "protocol_error";
    case KillReason::kStopTimeout:
      return "stop_timeout";
    case KillReason::kUnwanted:
      return "unwanted";
    case KillReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

bool counts_as_restart(KillReason r) {
  return r == KillReason::kMissedHeartbeats || r == KillReason::kProtocolError;
}

void PoolCore::spawn_worker(std::int64_t now) {
  const WorkerId id = ctl_.spawn();
  Worker w;
  w.id = id;
  w.state = Starting{now + to_ns(opts_.init_timeout)};
  w.spawned_ns = now;
  w.generation = generation_;
  w.frame_cap = opts_.max_payload;
  w.cpu_limit_ns = static_cast<std::int64_t>(worker_cpu_seconds(opts_)) * 1'000'000'000;
  w.slot = free_slot();
  if (w.slot >= slot_starts_.size()) slot_starts_.resize(w.slot + 1, 0);
  w.slot_restarts = slot_starts_[w.slot]++;
  next_check_ns_ = std::min(next_check_ns_, std::get<Starting>(w.state).deadline_ns);
  workers_.emplace(id, std::move(w));
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerStarted, ctl_.pid(id)));
}

std::uint32_t PoolCore::free_slot() const {
  std::vector<bool> taken;
  for (const auto& [id, w] : workers_) {
    if (!w.live()) continue;
    if (w.slot >= taken.size()) taken.resize(w.slot + 1, false);
    taken[w.slot] = true;
  }
  std::uint32_t slot = 0;
  while (slot < taken.size() && taken[slot]) ++slot;
  return slot;
}

Worker* PoolCore::find(WorkerId w) {
  auto it = workers_.find(w);
  return it == workers_.end() ? nullptr : &it->second;
}

std::size_t PoolCore::live_workers() const {
  return static_cast<std::size_t>(std::count_if(workers_.begin(), workers_.end(),
                                                [](const auto& kv) { return kv.second.live(); }));
}

std::size_t PoolCore::ready_workers() const {
  return static_cast<std::size_t>(std::count_if(
      workers_.begin(), workers_.end(),
      [](const std::pair<const WorkerId, Worker>& kv) { return kv.second.is<Ready>(); }));
}

void PoolCore::on_worker_error(WorkerId wid, std::string text) {
  if (Worker* w = find(wid)) w->last_error = std::move(text);
}

void PoolCore::on_protocol_error(WorkerId wid, std::string what) {
  if (Worker* w = find(wid)) {
    kill_worker(*w, KillReason::kProtocolError, Outcome::kProtocolError, "protocol_error: " + what,
                0, clock_ns_);
  }
}

void PoolCore::kill_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                           std::uint64_t task_id, std::int64_t) {
  if (w.is<Killing>()) return;  // already on its way out
  w.state = Killing{why, outcome, std::move(error), task_id, 0};
  ctl_.kill(w.id);
}

void PoolCore::kill_hung_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                                std::uint64_t task_id, std::int64_t now) {
  if (w.is<Killing>()) return;
  if (opts_.backtrace_grace.count() <= 0 || !ctl_.request_backtrace(w.id)) {
    kill_worker(w, why, outcome, std::move(error), task_id, now);
    return;
  }
  // Decided now, carried out when the answer is in or the grace is over (the loop keeps
  // serving the other workers meanwhile): observe_backtraces() sends the SIGKILL.
  w.state = Killing{why, outcome, std::move(error), task_id, now + to_ns(opts_.backtrace_grace)};
  ++backtraces_awaited_;
}

void PoolCore::observe_backtraces(std::int64_t now) {
  if (backtraces_awaited_ == 0) return;
  for (auto& [wid, w] : workers_) {
    Killing* k = w.killing();
    if (k == nullptr || k->backtrace_due_ns == 0) continue;
    if (now < k->backtrace_due_ns && !ctl_.backtrace(wid, ipc::BacktraceRead::kComplete)) continue;
    collect_backtrace(w, *k);
    ctl_.kill(wid);
  }
}

void PoolCore::collect_backtrace(Worker& w, Killing& k) {
  const std::int32_t pid = ctl_.pid(w.id);
  const std::string whose =
      "worker " + std::to_string(pid) +
      (k.task != 0 ? " (task " + std::to_string(k.task) + ")" : std::string(" (idle)"));
  k.backtrace_due_ns = 0;
  --backtraces_awaited_;
  if (std::optional<std::string> bt = ctl_.backtrace(w.id, ipc::BacktraceRead::kWhatArrived)) {
    w.backtrace = std::move(*bt);
    // Worker-written: one escaped line in the log (the account keeps the frames as sent).
    log(2, whose + " backtrace before the kill (" + k.error +
               "): " + log_text(w.backtrace, 2 * ipc::kBacktraceBytes));
  } else {
    log(2, whose + " gave no backtrace within " + std::to_string(opts_.backtrace_grace.count()) +
               " ms (" + k.error + ")");
  }
}

bool PoolCore::on_ready(WorkerId wid, std::int64_t now, std::string isolation) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr || w->is<Killing>()) return true;  // killed meanwhile: its Ready is late
  if (!w->is<Starting>()) return false;               // a second Ready
  // Started before a reconfigure changed the launch spec: it is replaced in its turn.
  const bool stale = w->generation != generation_ && !failed_;
  w->state = Ready{stale};
  if (stale) rolling_restart_ = true;
  w->ready_ns = now;
  w->isolation = std::move(isolation);
  init_failures_ = 0;
  next_sweep_ns_ = std::min(next_sweep_ns_, now + to_ns(opts_.heartbeat_interval));
  // A worker that became ready while the pool shrinks is not needed.
  if (live_workers() > target_workers_) drain_worker(*w, now);
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerReady, ctl_.pid(wid)));
  settle(now);
  advance_rolling_restart(now);
  return true;
}

void PoolCore::front_changed(Worker& w, std::int64_t now) {
  w.front_since_ns = now;
  w.cpu_base_ns = -1;  // observe_running() takes the new front's base
  if (w.ring.empty()) return;
  const InFlight& front = w.ring.front();
  if (front.ask != InFlight::Ask::kNone) {
    // Asked to stop or drop before it reached the front: the worker may be running it now
    // (it started it before our Cancel arrived), so its handler must see the flag too.
    ctl_.raise_cancel_flag(w.id, front.task->id);
    next_check_ns_ =
        std::min(next_check_ns_, std::max(front.asked_ns, now) + to_ns(opts_.cancel_grace));
  }
}

std::uint64_t PoolCore::settle_dead_ring(Worker& w, const supervision::Classified& c,
                                         std::int32_t pid, std::int64_t now) {
  const Killing* k = w.killing();
  std::vector<RingEntry> view;
  view.reserve(w.ring.size());
  for (const InFlight& f : w.ring) view.push_back({f.task->id, f.ended || f.task->decided});
  const std::optional<std::size_t> charged = charged_entry(view, k != nullptr ? k->task : 0);
  const std::uint64_t charged_id = charged ? w.ring[*charged].task->id : 0;
  std::vector<TaskPtr> never_started;
  for (std::size_t i = 0; i < w.ring.size(); ++i) {
    InFlight& f = w.ring[i];
    --in_flight_total_;
    if (view[i].ended) continue;
    if (charged && i == *charged) {
      if (f.task->cancel_requested) {
        finish(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled while running",
               CancelReason::kUser);
      } else {
        const bool killed_for_it = k != nullptr && k->task == f.task->id;
        end_attempt(f, c.outcome, c.error, pid, now,
                    killed_for_it ? std::move(w.backtrace) : std::string());
      }
    } else if (f.task->cancel_requested) {
      finish(f.task, TaskState::kCancelled, DeadReason::kNone, {}, "cancelled before it started",
             CancelReason::kUser);
    } else if (!charged && ++f.task->free_requeues > kMaxFreeRequeues) {
      // A death charged to nobody (its front had ended already) puts the ring back for free;
      // bounded, so no worker can keep a task from ever running out of attempts.
      end_attempt(
          f, Outcome::kLost,
          "its worker died " + std::to_string(f.task->free_requeues) + " times before it started",
          pid, now);
    } else {
      never_started.push_back(f.task);  // no attempt counted
    }
  }
  w.ring.clear();
  // Back at the front of the queue, in their original order: the backlog behind the ring.
  backlogged_ -= w.backlog.size();
  for (auto it = w.backlog.rbegin(); it != w.backlog.rend(); ++it) to_queue(*it, true, now);
  w.backlog.clear();
  for (auto it = never_started.rbegin(); it != never_started.rend(); ++it) to_queue(*it, true, now);
  return charged_id;
}

void PoolCore::on_exit(WorkerId wid, const supervision::ExitReport& report, std::int64_t now) {
  clock_ns_ = now;
  auto node = workers_.extract(wid);
  if (node.empty()) return;
  Worker& w = node.mapped();
  Killing* k = w.killing();
  if (k != nullptr && k->backtrace_due_ns != 0) collect_backtrace(w, *k);  // died first
  const supervision::Classified c = k != nullptr ? supervision::Classified{k->outcome, k->error}
                                                 : supervision::classify_exit(report);
  const std::uint64_t charged = settle_dead_ring(w, c, report.pid, now);

  const bool unwanted = k != nullptr && k->why == KillReason::kUnwanted;
  if (w.ready_ns == 0 && !unwanted) {
    ++init_failures_;
    failure_ = k != nullptr            ? k->error
               : !w.last_error.empty() ? w.last_error
                                       : "worker exited during init: " + describe(report.status);
    if (init_failures_ >= opts_.max_init_failures) {
      enter_failed("plugin init failed " + std::to_string(init_failures_) +
                   " times in a row: " + failure_);
    } else if (live_workers() < target_workers_) {
      const std::int64_t backoff =
          std::min<std::int64_t>(5000, 100ll << std::min<std::uint32_t>(init_failures_ - 1, 6));
      respawn_due_ns_ = now + backoff * kMsNs;
    }
  } else if (w.ready_ns != 0) {
    // Replaced because something went wrong (neither asked to stop nor unwanted), and
    // whether it counts toward crash_loop (KillReason; an unasked exit always does).
    bool replaced = true;
    bool counted = true;
    if (k != nullptr) {
      replaced = k->why != KillReason::kStopTimeout && k->why != KillReason::kShutdown;
      counted = counts_as_restart(k->why);
      if (k->why == KillReason::kStopTimeout) log(2, k->error);
    } else if (w.is<Stopping>()) {
      replaced = counted = false;
    }
    if (replaced) {
      ++stats_.restarts;
      if (c.outcome == Outcome::kLost) ++stats_.lost;
    }
    if (counted) note_restart(now);
  }
  if (opts_.on_event) {
    const std::string what = c.error.empty() ? describe(report.status) : c.error;
    emit({PoolEvent::Kind::kWorkerExited, charged, report.pid, TaskState::kQueued,
          DeadReason::kNone, c.outcome, 0, what});
  }
  adjust_worker_count(now);
  settle(now);
  advance_rolling_restart(now);
}

void PoolCore::note_restart(std::int64_t now) {
  if (intensity_.note_restart(now)) {
    log(3, "entered crash_loop: " + std::to_string(intensity_.recent()) +
               " worker restarts within " + std::to_string(opts_.restart_window.count()) +
               " ms; replacements now back off");
    // Tasks that asked to fail fast do not wait the crash loop out.
    for (const TaskPtr& t :
         queue_.remove_if([](const TaskRecord& r) { return r.opts.fail_fast; })) {
      finish(t, TaskState::kDeadLettered, DeadReason::kCrashLoop, {},
             "the pool entered crash_loop and the task asked to fail fast");
    }
  }
  if (intensity_.crash_loop()) {
    respawn_due_ns_ = std::max(respawn_due_ns_, intensity_.respawn_not_before());
  }
}

void PoolCore::enter_failed(std::string why) {
  failed_ = true;
  failure_ = std::move(why);
  respawn_due_ns_ = 0;
  dead_letter_waiting(DeadReason::kCrashLoop, failure_);
}

void PoolCore::restart_workers(bool rolling, std::int64_t now) {
  clock_ns_ = now;
  if (closing_ || failed_) return;
  for (auto& [wid, w] : workers_) {
    if (!w.is<Ready>()) continue;
    if (rolling) {
      std::get<Ready>(w.state).replace_pending = true;
      continue;
    }
    log(1, "restarting worker " + std::to_string(ctl_.pid(wid)));
    drain_worker(w, now);
  }
  rolling_restart_ = rolling;
  adjust_worker_count(now);
  advance_rolling_restart(now);
}

void PoolCore::advance_rolling_restart(std::int64_t now) {
  // Paused while a replacement waits out an init-failure backoff (a broken new plugin does
  // not take the old workers down with it); a past failure alone does not hold it.
  if (!rolling_restart_ || respawn_due_ns_ != 0) return;
  for (const auto& [wid, w] : workers_) {
    if (w.is<Starting>()) return;  // one replacement at a time
  }
  for (auto& [wid, w] : workers_) {
    Ready* r = std::get_if<Ready>(&w.state);
    if (r == nullptr || !r->replace_pending) continue;
    r->replace_pending = false;
    log(1, "rolling restart: replacing worker " + std::to_string(ctl_.pid(wid)));
    drain_worker(w, now);
    adjust_worker_count(now);
    return;
  }
  rolling_restart_ = false;
  log(1, "rolling restart finished");
}

void PoolCore::adjust_worker_count(std::int64_t now) {
  if (failed_ || respawn_due_ns_ != 0) return;
  const bool work_left =
      !queue_.empty() || !retries_.empty() || in_flight_total_ > 0 || backlogged_ > 0;
  if (closing_ && !work_left) return;
  std::size_t live = live_workers();
  std::uint32_t want = target_workers_;
  if (closing_ && want == 0) want = 1;  // accepted work still needs somebody
  while (live < want) {
    spawn_worker(now);
    ++live;
  }
}

void PoolCore::recycle(Worker& w, const std::string& why, std::int64_t now) {
  if (!w.is<Ready>()) return;
  ++stats_.recycled;
  log(1, "recycling worker " + std::to_string(ctl_.pid(w.id)) + ": " + why);
  drain_worker(w, now);
  adjust_worker_count(now);  // its replacement starts now; it stops once its ring is empty
}

void PoolCore::recycle_if_due(Worker& w, std::int64_t now) {
  if (opts_.recycle_max_tasks == 0 || w.tasks_done < opts_.recycle_max_tasks) return;
  recycle(w, "served " + std::to_string(w.tasks_done) + " tasks (recycle.max_tasks)", now);
}

void PoolCore::drain_worker(Worker& w, std::int64_t now) {
  if (!w.is<Ready>()) return;
  w.state = Draining{};
  backlogged_ -= w.backlog.size();
  for (auto it = w.backlog.rbegin(); it != w.backlog.rend(); ++it) to_queue(*it, true, now);
  w.backlog.clear();
  maybe_stop(w, now);
}

void PoolCore::maybe_stop(Worker& w, std::int64_t now) {
  if (w.is<Ready>() && closing_ && queue_.empty() && retries_.empty() && w.ring.empty() &&
      w.backlog.empty()) {
    w.state = Draining{};
  }
  if (w.is<Draining>() && w.ring.empty()) {
    const std::int64_t deadline = now + to_ns(opts_.stop_timeout);
    w.state = Stopping{deadline};
    ctl_.send_stop(w.id);
    next_check_ns_ = std::min(next_check_ns_, deadline);
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
  // Shrink: starting workers first, then idle ones, then the least loaded.
  while (live > n) {
    Worker* pick = nullptr;
    auto rank = [](const Worker& x) { return x.is<Starting>() ? 0 : 1 + x.ring.size(); };
    for (auto& [id, w] : workers_) {
      if (!w.live()) continue;
      if (pick == nullptr || rank(w) < rank(*pick)) pick = &w;
    }
    if (pick == nullptr) break;
    if (pick->is<Starting>()) {
      kill_worker(*pick, KillReason::kUnwanted, Outcome::kLost,
                  "stopped while starting (scaled down)", 0, now);
    } else {
      drain_worker(*pick, now);
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
    if (w.is<Starting>()) {
      i.state = "starting";
    } else if (w.is<Ready>()) {
      i.state = w.ring.empty() ? "idle" : "busy";
    } else if (w.is<Draining>()) {
      i.state = "draining";
    } else if (w.is<Stopping>()) {
      i.state = "stopping";
    } else {
      i.state = "killing";
    }
    i.slot = w.slot;
    i.restarts = w.slot_restarts;
    i.in_flight = static_cast<std::uint32_t>(w.ring.size());
    i.tasks_done = w.tasks_done;
    i.isolation = w.isolation;
    i.uptime_ms = (now - w.spawned_ns) / kMsNs;
    if (w.ready_ns != 0) {
      i.last_beat_ago_ms = std::max<std::int64_t>(0, now / kMsNs - ctl_.heartbeat_ms(id));
    }
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace sandpool::core
