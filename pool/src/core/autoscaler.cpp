// The autoscaler's rules (docs/architecture.md, "The autoscaler"), one function each: up on a
// queue wait, down on idle workers, and when to look again.
#include "core/autoscaler.hpp"

#include <algorithm>

#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;
using detail::to_ns;

Autoscaler::Autoscaler(const AutoscalePolicy& policy, const WorkerBounds& bounds)
    : policy_(policy), bounds_(bounds) {}

void Autoscaler::configure(const AutoscalePolicy& policy, const WorkerBounds& bounds,
                           std::int64_t now) {
  policy_ = policy;
  bounds_ = bounds;
  next_ns_ = policy_.enabled ? now : INT64_MAX;
}

std::uint32_t Autoscaler::clamp(std::uint32_t n) const {
  return std::clamp(n, bounds_.min, bounds_.max);
}

void Autoscaler::start(std::int64_t now) {
  if (policy_.enabled) next_ns_ = now;
}

std::int64_t Autoscaler::tick_ns() const {
  return std::clamp<std::int64_t>(to_ns(policy_.target_queue_wait) / 4, 5 * kMsNs, 100 * kMsNs);
}

void Autoscaler::note_waiting(std::int64_t now, std::uint32_t target) {
  if (!policy_.enabled) return;
  next_ns_ = std::min(next_ns_, target == 0 ? now : now + tick_ns());
}

void Autoscaler::note_manual_step(std::int64_t now) {
  last_step_ns_ = now;
  next_ns_ = std::min(next_ns_, now + tick_ns());
}

AutoscaleStep Autoscaler::decide(std::int64_t now, const AutoscaleView& view) {
  next_ns_ = INT64_MAX;
  queue_wait_ns_ = -1;
  looked_ = policy_.enabled && !view.frozen;
  if (!looked_) return {};
  queue_wait_ns_ = view.queue_wait_ns;
  return view.queue_wait_ns >= 0 ? step_up(now, view) : step_down(now, view);
}

AutoscaleStep Autoscaler::step_up(std::int64_t now, const AutoscaleView& view) {
  AutoscaleStep s;
  if (view.target == 0 && bounds_.max > 0) {
    // On demand: a task waits and the pool has no worker. Even in crash_loop: without a
    // worker nothing runs at all, and the crash backoff still paces the start.
    s = {AutoscaleStep::Kind::kUp, 1,
         "autoscale up: a task waits and the pool has no worker (workers.min 0)"};
  } else if (view.target < bounds_.max && !view.crash_loop && !view.respawn_pending &&
             view.queue_wait_ns > to_ns(policy_.target_queue_wait) && !view.worker_starting &&
             now >= last_step_ns_ + to_ns(policy_.cooldown)) {
    // Never in crash_loop (more workers would crash more), never past max, and while a
    // worker starts its capacity is on the way: the step waits for it.
    s.kind = AutoscaleStep::Kind::kUp;
    s.target = std::min(bounds_.max, view.target + policy_.scale_up_step);
    s.reason = "autoscale up: queue wait " + std::to_string(view.queue_wait_ns / kMsNs) +
               " ms > target_queue_wait " + std::to_string(policy_.target_queue_wait.count()) +
               " ms";
  }
  if (s.kind == AutoscaleStep::Kind::kUp) last_step_ns_ = last_up_ns_ = now;
  return s;
}

AutoscaleStep Autoscaler::step_down(std::int64_t now, const AutoscaleView& view) {
  // Nothing waits; the workers idle for idle_timeout are retired, longest idle first, down
  // to min. Two cooldowns after a step up, so that a step is never reversed within two
  // cooldowns.
  const std::int64_t cooldown = to_ns(policy_.cooldown);
  if (view.target <= bounds_.min || now < last_up_ns_ + 2 * cooldown ||
      now < last_step_ns_ + cooldown) {
    return {};
  }
  std::uint32_t idle = 0;
  std::int64_t longest = 0;
  for (const ReadyWorkerIdle& w : view.ready) {
    if (!w.idle) continue;
    const std::int64_t for_ns = now - w.last_work_ns;
    if (for_ns < to_ns(policy_.idle_timeout)) continue;
    ++idle;
    longest = std::max(longest, for_ns);
  }
  const std::uint32_t retire = std::min(idle, view.target - bounds_.min);
  if (retire == 0) return {};
  last_step_ns_ = now;
  return {AutoscaleStep::Kind::kDown, view.target - retire,
          "autoscale down: " + std::to_string(retire) + " worker(s) idle for " +
              std::to_string(longest / kMsNs) + " ms >= idle_timeout " +
              std::to_string(policy_.idle_timeout.count()) + " ms"};
}

void Autoscaler::plan_next_look(std::int64_t now, bool open_tasks, std::uint32_t target,
                                std::span<const ReadyWorkerIdle> ready) {
  if (!looked_) return;  // off, or a closing or failed pool: no look is due
  if (open_tasks) {
    next_ns_ = now + tick_ns();
    return;
  }
  if (target <= bounds_.min) return;
  const std::int64_t cooldown = to_ns(policy_.cooldown);
  std::int64_t due = INT64_MAX;
  for (const ReadyWorkerIdle& w : ready) {
    due = std::min(due, w.last_work_ns + to_ns(policy_.idle_timeout));
  }
  if (due != INT64_MAX) {
    due = std::max({due, last_up_ns_ + 2 * cooldown, last_step_ns_ + cooldown, now + kMsNs});
  } else {
    due = now + tick_ns();  // only starting ones: look once they are ready
  }
  next_ns_ = due;
}

}  // namespace sandpool::core
