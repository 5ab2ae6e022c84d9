// PoolCore, the autoscaler (AutoscalePolicy; docs/architecture.md, "The autoscaler"): it
// moves the worker target within worker_bounds from two signals, the queue wait (how long the
// task that has waited longest for a worker has waited) and each worker's idle time, with a
// cooldown between steps so that it never flaps. It only sets the target; starting, draining
// and replacing workers stay with the worker lifecycle (pool_core_workers.cpp).
#include <algorithm>
#include <string>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::to_ns;

std::int64_t PoolCore::autoscale_tick_ns() const {
  return std::clamp<std::int64_t>(to_ns(opts_.autoscale.target_queue_wait) / 4, 5 * kMsNs,
                                  100 * kMsNs);
}

void PoolCore::note_waiting(std::int64_t now) {
  if (!opts_.autoscale.enabled) return;
  next_autoscale_ns_ =
      std::min(next_autoscale_ns_, target_workers_ == 0 ? now : now + autoscale_tick_ns());
}

std::int64_t PoolCore::longest_wait(std::int64_t now) const {
  std::int64_t since = queue_.oldest_waiting_since();
  for (const auto& [id, w] : workers_) {
    // The front runs (or is about to); the next one not ended waits behind it.
    for (std::size_t i = 1; i < w.ring.size(); ++i) {
      if (w.ring[i].ended) continue;
      since = std::min(since, w.ring[i].task->waiting_since_ns);
      break;
    }
  }
  return since == INT64_MAX ? -1 : std::max<std::int64_t>(0, now - since);
}

void PoolCore::note_target(std::uint32_t n, std::string why) {
  log(1, "workers target " + std::to_string(target_workers_) + " -> " + std::to_string(n) + ": " +
             why);
  target_reason_ = std::move(why);
  if (opts_.on_event) {
    PoolEvent e;
    e.kind = PoolEvent::Kind::kScaled;
    e.workers = n;
    e.detail = target_reason_;
    emit(e);
  }
}

void PoolCore::autoscale(std::int64_t now) {
  next_autoscale_ns_ = INT64_MAX;
  queue_wait_ns_ = -1;
  const AutoscalePolicy& a = opts_.autoscale;
  if (!a.enabled || closing_ || failed_) return;
  const WorkerBounds& b = opts_.worker_bounds;
  const std::int64_t wait = longest_wait(now);
  queue_wait_ns_ = wait;
  const std::int64_t cooldown = to_ns(a.cooldown);

  if (wait >= 0) {
    // Up. Never in crash_loop (more workers would crash more), never past max, and while a
    // worker starts its capacity is on the way: the step waits for it.
    const bool starting = std::any_of(
        workers_.begin(), workers_.end(),
        [](const std::pair<const WorkerId, Worker>& kv) { return kv.second.is<Starting>(); });
    if (target_workers_ == 0 && b.max > 0) {
      // On demand: a task waits and the pool has no worker. Even in crash_loop: without a
      // worker nothing runs at all, and the crash backoff still paces the start.
      last_step_ns_ = last_up_ns_ = now;
      ++stats_.autoscale_up;
      note_target(1, "autoscale up: a task waits and the pool has no worker (workers.min 0)");
      set_target(1, now);
    } else if (target_workers_ < b.max && !intensity_.crash_loop() && respawn_due_ns_ == 0 &&
               wait > to_ns(a.target_queue_wait) && !starting && now >= last_step_ns_ + cooldown) {
      const std::uint32_t n = std::min(b.max, target_workers_ + a.scale_up_step);
      last_step_ns_ = last_up_ns_ = now;
      ++stats_.autoscale_up;
      note_target(n, "autoscale up: queue wait " + std::to_string(wait / kMsNs) +
                         " ms > target_queue_wait " + std::to_string(a.target_queue_wait.count()) +
                         " ms");
      set_target(n, now);
    }
  } else if (target_workers_ > b.min && now >= last_up_ns_ + 2 * cooldown &&
             now >= last_step_ns_ + cooldown) {
    // Down: nothing waits; the workers idle for idle_timeout are retired, longest idle
    // first, down to min. Two cooldowns after a step up, so that a step is never reversed
    // within two cooldowns.
    std::uint32_t idle = 0;
    std::int64_t longest = 0;
    for (const auto& [id, w] : workers_) {
      if (!w.is<Ready>() || !w.ring.empty() || !w.backlog.empty()) continue;
      const std::int64_t for_ns = now - w.last_work_ns;
      if (for_ns < to_ns(a.idle_timeout)) continue;
      ++idle;
      longest = std::max(longest, for_ns);
    }
    const std::uint32_t retire = std::min(idle, target_workers_ - b.min);
    if (retire > 0) {
      const std::uint32_t n = target_workers_ - retire;
      last_step_ns_ = now;
      ++stats_.autoscale_down;
      note_target(n, "autoscale down: " + std::to_string(retire) + " worker(s) idle for " +
                         std::to_string(longest / kMsNs) + " ms >= idle_timeout " +
                         std::to_string(a.idle_timeout.count()) + " ms");
      set_target(n, now);
    }
  }

  // When to look again: every tick while tasks are open (a wait may pass the target); else
  // when the next idle worker reaches idle_timeout, if the target is above min.
  if (open_tasks_ > 0) {
    next_autoscale_ns_ = now + autoscale_tick_ns();
  } else if (target_workers_ > b.min) {
    std::int64_t due = INT64_MAX;
    for (const auto& [id, w] : workers_) {
      if (w.is<Ready>()) due = std::min(due, w.last_work_ns + to_ns(a.idle_timeout));
    }
    if (due != INT64_MAX) {
      due = std::max({due, last_up_ns_ + 2 * cooldown, last_step_ns_ + cooldown, now + kMsNs});
    } else {
      due = now + autoscale_tick_ns();  // only starting ones: look once they are ready
    }
    next_autoscale_ns_ = due;
  }
}

}  // namespace sandpool::core
