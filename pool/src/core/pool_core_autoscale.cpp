// PoolCore and the autoscaler (AutoscalePolicy; docs/architecture.md, "The autoscaler"): the
// core gathers the two signals, the queue wait (how long the task that has waited longest for
// a worker has waited) and each ready worker's idle time; the Autoscaler (autoscaler.hpp)
// decides a step of the worker target; the core applies it. Starting, draining and replacing
// workers stay with the worker lifecycle (pool_core_workers.cpp).
#include <algorithm>
#include <string>

#include "core/pool_core.hpp"

namespace sandpool::core {

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
  log(1, "workers target " + std::to_string(workers_.target()) + " -> " + std::to_string(n) + ": " +
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

std::span<const ReadyWorkerIdle> PoolCore::ready_idleness() {
  ready_scratch_.clear();
  for (const auto& [id, w] : workers_) {
    if (!w.is<Ready>()) continue;
    ready_scratch_.push_back({w.last_work_ns, w.ring.empty() && w.backlog.empty()});
  }
  return ready_scratch_;
}

void PoolCore::autoscale(std::int64_t now) {
  AutoscaleView view;
  view.frozen = closing_ || failed_;
  if (autoscaler_.enabled() && !view.frozen) {
    view.queue_wait_ns = longest_wait(now);
    view.target = workers_.target();
    view.worker_starting = workers_.any_starting();
    view.crash_loop = workers_.crash_loop();
    view.respawn_pending = workers_.respawn_held();
    view.ready = ready_idleness();
  }
  AutoscaleStep step = autoscaler_.decide(now, view);
  if (step.kind != AutoscaleStep::Kind::kNone) {
    ++(step.kind == AutoscaleStep::Kind::kUp ? stats_.autoscale_up : stats_.autoscale_down);
    note_target(step.target, std::move(step.reason));
    set_target(step.target, now);
  }
  autoscaler_.plan_next_look(now, ledger_.open_tasks() > 0, workers_.target(), ready_idleness());
}

}  // namespace sandpool::core
