// PoolCore, health: the clock's work. Due retries and respawns, every deadline a waiting
// state carries (init, task timeouts, cancel and withdrawal grace, stop), and the periodic
// sweep (heartbeats, per-task CPU, RSS and age recycling, queue TTL, leaving crash_loop).
#include <algorithm>
#include <climits>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::to_ns;

void PoolCore::on_tick(std::int64_t now) {
  clock_ns_ = now;
  release_scheduled(now);
  if (now >= next_aging_ns_) {
    next_aging_ns_ = queue_.age(now, to_ns(opts_.aging_interval));
  }
  while (!retries_.empty() && retries_.top().due_ns <= now) {
    TaskPtr t = retries_.top().task;
    retries_.pop();
    to_queue(std::move(t), false, now);  // skips a task cancelled meanwhile
  }
  if (workers_.take_due_respawn(now)) {
    adjust_worker_count(now);
    advance_rolling_restart(now);  // it paused for this backoff
  }
  if (now >= next_check_ns_) check_deadlines(now);
  if (now >= next_sweep_ns_) sweep(now);
  settle(now);
  if (autoscaler_.due(now)) autoscale(now);
}

void PoolCore::check_deadlines(std::int64_t now) {
  std::int64_t next = INT64_MAX;
  for (auto& [wid, w] : workers_) {
    if (const Starting* s = std::get_if<Starting>(&w.state)) {
      if (now >= s->deadline_ns) {
        kill_worker(
            w, KillReason::kInitTimeout, Outcome::kLost,
            "plugin init timed out after " + std::to_string(opts_.init_timeout.count()) + " ms", 0,
            now);
      } else {
        next = std::min(next, s->deadline_ns);
      }
      continue;
    }
    if (const Stopping* s = std::get_if<Stopping>(&w.state)) {
      if (now >= s->deadline_ns) {
        kill_worker(w, KillReason::kStopTimeout, Outcome::kLost,
                    "worker " + std::to_string(ctl_.pid(wid)) + " did not exit within " +
                        std::to_string(opts_.stop_timeout.count()) +
                        " ms of being asked to stop (stop_timeout): killed",
                    0, now);
      } else {
        next = std::min(next, s->deadline_ns);
      }
      continue;
    }
    if (w.is<Killing>()) continue;
    check_ring_deadlines(w, now, &next);
  }
  if (!retries_.empty()) next = std::min(next, retries_.top().due_ns);
  next_check_ns_ = next;
}

bool PoolCore::check_ring_deadlines(Worker& w, std::int64_t now, std::int64_t* next) {
  const std::int64_t grace = to_ns(opts_.cancel_grace);
  for (std::size_t i = 0; i < w.ring.size(); ++i) {
    InFlight& f = w.ring[i];
    const bool front = i == 0;
    if (front && f.ask != InFlight::Ask::kNone) {
      // The worker has had cancel_grace, since the task reached the front, to stop or drop it.
      const std::int64_t due = std::max(f.asked_ns, w.front_since_ns) + grace;
      if (now >= due) {
        if (f.ask == InFlight::Ask::kCancel) {
          kill_worker(w, KillReason::kCancelIgnored, Outcome::kCancelled,
                      "cancelled: did not stop within the grace period", f.task->id, now);
        } else {
          log(2, "worker " + std::to_string(ctl_.pid(w.id)) + " kept task " +
                     std::to_string(f.task->id) +
                     " cancel_grace after it was withdrawn (timed out in its ring): killed");
          kill_worker(w, KillReason::kWithdrawalIgnored, Outcome::kLost,
                      "kept running a task withdrawn from its ring", f.task->id, now);
        }
        return true;
      }
      *next = std::min(*next, due);
    }
    if (f.ended) continue;
    if (now < f.deadline_ns) {
      *next = std::min(*next, f.deadline_ns);
      continue;
    }
    const std::string error =
        "timed out after " + std::to_string(f.task->timeout_ns() / kMsNs) + " ms";
    if (front) {
      // Running, or next to run, by the pool's own account of the ring.
      kill_hung_worker(w, KillReason::kTaskTimeout, Outcome::kTimedOut, error, f.task->id, now);
      return true;
    }
    // Timed out waiting in the ring behind a slower task: withdraw it, keep the worker. Once
    // it reaches the front the worker has cancel_grace to drop it (front_changed()).
    f.ended = true;
    f.ask = InFlight::Ask::kWithdraw;
    f.asked_ns = now;
    ctl_.send_cancel(w.id, f.task->id);
    end_attempt(f, Outcome::kTimedOut, error + " waiting in the worker's ring", ctl_.pid(w.id),
                now);
  }
  return false;
}

void PoolCore::observe_running() {
  for (auto& [wid, w] : workers_) {
    if (w.ring.empty()) continue;
    if (opts_.cpu_time.count() > 0 && w.cpu_base_ns < 0 && !w.is<Killing>()) {
      w.cpu_base_ns = ctl_.cpu_ns(wid);  // the front's CPU is metered from here
    }
    // Worker-writable: read once, believed only where it names a task of this ring.
    const std::uint64_t started = ctl_.started_task(wid);
    if (started == 0) continue;
    bool front = true;  // no open entry before this one: the one the worker runs or runs next
    for (InFlight& f : w.ring) {
      if (f.task->id != started) {
        front = front && f.ended;
        continue;
      }
      if (f.ended) break;
      if (f.task->state.load(std::memory_order_relaxed) == TaskState::kDispatched) {
        f.task->state.store(TaskState::kRunning, std::memory_order_release);
      }
      // The journal's start: only for the front, as a death is charged only to the front
      // (death_charge.hpp). A worker that names a later entry gets no start journaled for
      // it; one that never names its front leaves that task to read back `queued` after a
      // crash of poold (it runs again without a `lost` attempt: at-least-once holds).
      if (front && !f.start_journaled && journal_.started) {
        f.start_journaled = true;
        journal_.started(*f.task,
                         {f.attempt, Outcome::kOk, {}, ctl_.pid(wid), f.started_wall_ms, 0});
      }
      break;
    }
  }
}

std::int64_t PoolCore::next_deadline() const {
  // Without workers the sweep still has queue TTLs to check (a pool scaled to none).
  const bool sweeps = !workers_.empty() || ledger_.ttl_tasks() > 0;
  std::int64_t next = std::min(next_check_ns_, sweeps ? next_sweep_ns_ : INT64_MAX);
  if (!retries_.empty()) next = std::min(next, retries_.top().due_ns);
  if (!scheduled_.empty()) next = std::min(next, scheduled_.top().due_ns);
  next = std::min(next, next_aging_ns_);
  next = std::min(next, autoscaler_.next_look_ns());
  if (gates_.on()) next = std::min({next, gates_.next_ns(), flow_wake_ns_});
  if (workers_.respawn_held()) next = std::min(next, workers_.respawn_due_ns());
  if (workers_.backtraces_awaited() > 0) {
    for (const auto& [wid, w] : workers_) {
      const Killing* k = w.killing();
      if (k != nullptr && k->backtrace_due_ns != 0) next = std::min(next, k->backtrace_due_ns);
    }
  }
  return next;
}

void PoolCore::sweep(std::int64_t now) {
  next_sweep_ns_ = now + to_ns(opts_.heartbeat_interval);
  ledger_.expire(now);
  const std::int64_t now_ms = now / kMsNs;
  const std::int64_t silent_limit_ms =
      static_cast<std::int64_t>(opts_.missed_heartbeats) * opts_.heartbeat_interval.count();
  // Workers started together age together: one is recycled for its age per sweep (one
  // heartbeat interval apart), so the pool never replaces them all at once.
  bool aged_one = false;
  const bool sample_rss = samples_rss();
  for (auto& [wid, w] : workers_) {
    if (!w.is<Ready>() && !w.is<Draining>()) continue;
    // The task loop must beat whenever the worker is not inside a handler: with an empty
    // ring, or when it says itself that no handler runs (its word can only expose it). A
    // running handler is bounded by its task's timeout and cpu_time instead.
    if (w.ring.empty() || ctl_.started_task(wid) == 0) {
      const std::int64_t silent_ms = now_ms - ctl_.heartbeat_ms(wid);
      if (silent_ms > silent_limit_ms) {
        ++stats_.heartbeat_kills;
        const std::string why = "worker " + std::to_string(ctl_.pid(wid)) + " missed " +
                                std::to_string(opts_.missed_heartbeats) +
                                " heartbeats (silent for " + std::to_string(silent_ms) +
                                " ms): killed and replaced";
        log(2, why);
        kill_hung_worker(w, KillReason::kMissedHeartbeats, Outcome::kLost, why, 0, now);
        continue;
      }
    }
    if (opts_.cpu_time.count() > 0 && !w.ring.empty() && w.cpu_base_ns >= 0) {
      const std::int64_t used = ctl_.cpu_ns(wid) - w.cpu_base_ns;
      if (used > to_ns(opts_.cpu_time)) {
        kill_hung_worker(w, KillReason::kCpuLimit, Outcome::kResourceLimit,
                         "resource_limit: cpu (" + std::to_string(used / kMsNs) +
                             " ms of CPU, limit " + std::to_string(opts_.cpu_time.count()) + " ms)",
                         w.ring.front().task->id, now);
        continue;
      }
    }
    if (w.is<Ready>() && w.cpu_limit_ns > 0) {
      // Recycled before its RLIMIT_CPU (the kernel's lifetime backstop) would end it mid-task.
      const std::int64_t used = ctl_.cpu_ns(wid);
      if (used > w.cpu_limit_ns / 10 * 8) {
        recycle(w,
                "used " + std::to_string(used / 1'000'000'000) +
                    " s of CPU, 80% of its RLIMIT_CPU (" +
                    std::to_string(w.cpu_limit_ns / 1'000'000'000) + " s)",
                now);
        continue;
      }
    }
    if (!aged_one && opts_.recycle_max_age.count() > 0 && w.is<Ready>() && w.ready_ns > 0 &&
        now - w.ready_ns >= to_ns(opts_.recycle_max_age)) {
      aged_one = true;
      recycle(w, "up for " + std::to_string((now - w.ready_ns) / kMsNs) + " ms (recycle.max_age)",
              now);
      continue;
    }
    if (sample_rss) w.rss_sampled = ctl_.rss_bytes(wid);
    if (opts_.recycle_max_rss != 0 && w.is<Ready>()) {
      const std::uint64_t rss = w.rss_sampled;
      if (rss > opts_.recycle_max_rss) {
        recycle(w, "RSS " + std::to_string(rss >> 20) + " MiB above recycle.max_rss", now);
      }
    }
  }
  expire_queued(now);
  if (const Worker* w = workers_.note_stable(now)) {
    log(1, "left crash_loop: worker " + std::to_string(ctl_.pid(w->id)) + " stayed up for " +
               std::to_string(opts_.stable_after.count()) + " ms");
  }
}

void PoolCore::expire_queued(std::int64_t now) {
  if (ledger_.ttl_tasks() == 0) return;
  const auto expired = [&](const TaskRecord& r) {
    return r.expires_ns() != 0 && r.expires_ns() <= now && r.attempts_ended == 0;
  };
  const auto expire = [&](const TaskPtr& t, std::string_view where) {
    ++stats_.expired;
    end_task(t, TaskState::kDeadLettered, DeadReason::kExpired, {},
             "expired: " + std::string(where) + " for " +
                 std::to_string((now - t->queued_ns) / kMsNs) + " ms, past its queue_ttl");
  };
  for (const TaskPtr& t : queue_.remove_if(expired)) expire(t, "queued");
  // Held back by a rate limit or a type's cap (throttled), or waiting for its affinity
  // worker: still waiting, so its TTL runs there too.
  for (const TaskPtr& t : gates_.remove_if(expired)) expire(t, "throttled");
  if (backlogged_ == 0) return;
  // Taken out first, ended after: an end's callbacks may submit, which may dispatch from
  // the backlogs.
  std::vector<TaskPtr> out;
  for (auto& [wid, w] : workers_) {
    for (auto it = w.backlog.begin(); it != w.backlog.end();) {
      if (!expired(**it)) {
        ++it;
        continue;
      }
      out.push_back(std::move(*it));
      it = w.backlog.erase(it);
      --backlogged_;
    }
  }
  for (const TaskPtr& t : out) expire(t, "queued for its affinity worker");
}

}  // namespace sandpool::core
