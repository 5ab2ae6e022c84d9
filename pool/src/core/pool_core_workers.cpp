// PoolCore, worker lifecycle: spawning into a slot, readiness, the ring's front, draining
// and stopping, recycling, restarts (all at once or rolling), the worker count and scaling,
// and the per-worker view. Kills and exits are in pool_core_exits.cpp.
#include <algorithm>
#include <string>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::to_ns;
using detail::worker_event;

void PoolCore::spawn_worker(std::int64_t now) {
  const WorkerId id = ctl_.spawn();
  Worker w;
  w.id = id;
  w.state = Starting{now + to_ns(opts_.init_timeout)};
  w.spawned_ns = now;
  w.frame_cap = opts_.max_payload;
  w.cpu_limit_ns = static_cast<std::int64_t>(worker_cpu_seconds(opts_)) * 1'000'000'000;
  next_check_ns_ = std::min(next_check_ns_, std::get<Starting>(w.state).deadline_ns);
  workers_.add(std::move(w));  // in its slot, of the current generation
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerStarted, ctl_.pid(id)));
}

std::size_t PoolCore::ready_workers() const { return workers_.ready(); }

bool PoolCore::on_ready(WorkerId wid, std::int64_t now, std::string isolation) {
  clock_ns_ = now;
  Worker* w = find(wid);
  if (w == nullptr || w->is<Killing>()) return true;  // killed meanwhile: its Ready is late
  if (!w->is<Starting>()) return false;               // a second Ready
  // Started before a reconfigure changed the launch spec: it is replaced in its turn.
  const bool stale = workers_.stale(*w) && !failed_;
  w->state = Ready{stale};
  if (stale) workers_.set_rolling_restart(true);
  w->ready_ns = now;
  w->last_work_ns = now;
  w->isolation = std::move(isolation);
  if (samples_rss()) w->rss_sampled = ctl_.rss_bytes(wid);  // least-rss: not 0 until the sweep
  workers_.note_ready();
  next_sweep_ns_ = std::min(next_sweep_ns_, now + to_ns(opts_.heartbeat_interval));
  // A worker that became ready while the pool shrinks is not needed.
  if (workers_.live() > workers_.target()) drain_worker(*w, now);
  settle(now);
  advance_rolling_restart(now);
  // After the rolling restart moved on: hearing the last replacement's Ready, a user finds
  // the restart over (and a raised max_payload released, PoolLoop).
  if (opts_.on_event) emit(worker_event(PoolEvent::Kind::kWorkerReady, ctl_.pid(wid)));
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

void PoolCore::drain_worker(Worker& w, std::int64_t now) {
  if (!w.is<Ready>()) return;
  w.state = Draining{};
  backlogged_ -= w.backlog.size();
  for (auto it = w.backlog.rbegin(); it != w.backlog.rend(); ++it) to_queue(*it, true, now);
  w.backlog.clear();
  maybe_stop(w, now);
}

void PoolCore::maybe_stop(Worker& w, std::int64_t now) {
  if (w.is<Ready>() && closing_ && queue_.empty() && retries_.empty() && scheduled_.empty() &&
      gates_.parked() == 0 && w.ring.empty() && w.backlog.empty()) {
    w.state = Draining{};
  }
  if (w.is<Draining>() && w.ring.empty()) {
    const std::int64_t deadline = now + to_ns(opts_.stop_timeout);
    w.state = Stopping{deadline};
    ctl_.send_stop(w.id);
    next_check_ns_ = std::min(next_check_ns_, deadline);
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

void PoolCore::restart_workers(bool rolling, std::int64_t now) {
  clock_ns_ = now;
  if (closing_ || failed_) return;
  if (rolling) {
    workers_.mark_all_for_replacement();
  } else {
    for (auto& [wid, w] : workers_) {
      if (!w.is<Ready>()) continue;
      log(1, "restarting worker " + std::to_string(ctl_.pid(wid)));
      drain_worker(w, now);
    }
  }
  workers_.set_rolling_restart(rolling);
  adjust_worker_count(now);
  advance_rolling_restart(now);
}

void PoolCore::advance_rolling_restart(std::int64_t now) {
  // One at a time, paused while a replacement starts or waits out a backoff (WorkerSet).
  const WorkerSet::RollingStep step = workers_.next_replacement();
  if (step.kind == WorkerSet::RollingStep::Kind::kReplace) {
    log(1, "rolling restart: replacing worker " + std::to_string(ctl_.pid(step.worker->id)));
    drain_worker(*step.worker, now);
    adjust_worker_count(now);
  } else if (step.kind == WorkerSet::RollingStep::Kind::kFinished) {
    log(1, "rolling restart finished");
  }
}

void PoolCore::adjust_worker_count(std::int64_t now) {
  if (failed_ || workers_.respawn_held()) return;
  const bool work_left = !queue_.empty() || !retries_.empty() || !scheduled_.empty() ||
                         in_flight_total_ > 0 || backlogged_ > 0 || gates_.parked() > 0;
  if (closing_ && !work_left) return;
  std::size_t live = workers_.live();
  std::uint32_t want = workers_.target();
  if (closing_ && want == 0) want = 1;  // accepted work still needs somebody
  while (live < want) {
    spawn_worker(now);
    ++live;
  }
}

void PoolCore::scale(std::uint32_t n, std::int64_t now) {
  clock_ns_ = now;
  if (autoscaler_.enabled()) {
    // The autoscaler goes on from the target set here, one cooldown later.
    n = autoscaler_.clamp(n);
    autoscaler_.note_manual_step(now);
  } else {
    n = std::max(n, 1u);  // nothing would ever start a worker again
  }
  if (n != workers_.target()) note_target(n, "scaled to " + std::to_string(n));
  set_target(n, now);
}

void PoolCore::set_target(std::uint32_t n, std::int64_t now) {
  workers_.set_target(n);
  std::size_t live = workers_.live();
  if (live < n) {
    adjust_worker_count(now);
    return;
  }
  // Shrink: starting workers first, then idle ones (the longest idle first), then the least
  // loaded.
  while (live > n) {
    Worker* pick = workers_.pick_to_shrink();
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
