// PoolCore's metrics: what the loop thread records as tasks move, and the snapshot it
// hands out. Kept apart from the task and worker files, which only call the note_* hooks.
#include "core/pool_core.hpp"

namespace sandpool::core {

void PoolCore::note_dispatch(TaskRecord& t, std::int64_t now) {
  // Only the first dispatch counts as queue wait: later ones (retries, requeues from a dead
  // worker's ring) do not.
  if (t.dispatched_once) return;
  t.dispatched_once = true;
  recorded_.queue_wait.record(now - t.queued_ns);
}

void PoolCore::note_attempt_end(const InFlight& f, Outcome outcome, std::int64_t now) {
  ++recorded_.attempts[static_cast<std::size_t>(outcome)];
  recorded_.run_time.record(now - f.dispatched_ns);
}

void PoolCore::note_terminal(const TaskRecord& t, TaskState state, DeadReason reason) {
  if (state == TaskState::kDeadLettered)
    ++recorded_.dead_lettered[static_cast<std::size_t>(reason)];
  recorded_.end_to_end.record(clock_ns_ - t.queued_ns);
}

PoolMetrics PoolCore::metrics() const {
  PoolMetrics m = recorded_;
  m.pool = opts_.name;
  m.stats = stats();
  m.failed = failed_;
  if (tenant_counts_ != nullptr) m.tenants_waiting = tenant_counts_->largest(kMetricsTenants);
  for (const auto& [id, w] : workers_) {
    if (w.is<Starting>()) {
      ++m.workers.starting;
    } else if (w.is<Ready>()) {
      ++(w.ring.empty() ? m.workers.idle : m.workers.busy);
    } else if (w.is<Draining>()) {
      ++m.workers.draining;
    } else {
      ++m.workers.stopping;  // stopping, or being killed
    }
    m.worker_rss_bytes += ctl_.rss_bytes(id);
  }
  return m;
}

}  // namespace sandpool::core
