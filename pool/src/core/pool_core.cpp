// PoolCore: construction, the entry points that concern tasks and workers alike (start,
// close, settling after every event) and the queries. The rest is split by concern:
//   tasks:   pool_core_dispatch.cpp (submit, admission, the queue funnel, dispatch, cancel),
//            pool_core_attempts.cpp (results, an attempt's end, retries, ends, dead letters);
//   workers: pool_core_workers.cpp (start, ready, drain and stop, recycling, restarts, scale),
//            pool_core_exits.cpp (kills, backtraces, exits and who pays, crash_loop, failure);
//   health:  pool_core_health.cpp (ticks, deadlines, the periodic sweep, queue TTL);
//   scaling: pool_core_autoscale.cpp (what the Autoscaler reads, applying its step);
//   metrics: pool_core_metrics.cpp; reconfigure: pool_reconfigure.cpp.
// The parts that decide, each with its own state and tests: autoscaler.cpp, task_ledger.cpp,
// worker_set.cpp (and dispatcher.cpp, task_queue.cpp, flow_gates.cpp).
#include <utility>

#include "core/pool_core.hpp"

#include <utility>

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
      ledger_({options.task_records_max, to_ns(options.task_records_max_age),
               static_cast<std::size_t>(options.task_records_max_bytes)},
              options.dead_letter_capacity),
      dispatcher_(options.dispatch, options.seed),
      rng_(options.seed ^ 0x5a5a5a5a5a5a5a5aull),
      workers_(options.workers, intensity_limits(options)),
      autoscaler_(options.autoscale, options.worker_bounds) {
  queue_.set_tenants(options.tenants);
}

void PoolCore::start(std::int64_t now) {
  clock_ns_ = now;
  gates_.configure(opts_.flow, now, {});
  for (std::uint32_t i = 0; i < workers_.target(); ++i) spawn_worker(now);
  autoscaler_.start(now);
}

void PoolCore::close(std::int64_t now) {
  clock_ns_ = now;
  closing_ = true;
  adjust_worker_count(now);
  settle(now);
}

void PoolCore::settle(std::int64_t now) {
  if (batching_) {
    batch_settle_ = true;
    return;
  }
  dispatch(now);
  if (!closing_) return;
  for (auto& [id, w] : workers_) maybe_stop(w, now);
}

void PoolCore::end_batch(std::int64_t now) {
  batching_ = false;
  if (std::exchange(batch_settle_, false)) {
    batch_dispatch_ = false;
    settle(now);
  } else if (std::exchange(batch_dispatch_, false)) {
    dispatch(now);
  }
  if (std::exchange(batch_autoscale_, false) && autoscaler_.due(now)) autoscale(now);
}

bool PoolCore::idle() const { return ledger_.open_tasks() == 0; }

bool PoolCore::wound_down() const {
  // Letters and journaled ends still being written do not hold the loop: the store owns them now,
  // and on_letter_written() still ends their tasks once they are written.
  return closing_ && workers_.empty() && ledger_.only_writes_open();
}

TaskPtr PoolCore::find_task(std::uint64_t id) const {
  if (TaskPtr t = queue_.find(id)) return t;
  for (const RetryEntry& e : retries_.entries()) {
    if (e.task->id == id && !e.task->decided) return e.task;
  }
  for (const RetryEntry& e : scheduled_.entries()) {
    if (e.task->id == id && !e.task->decided) return e.task;
  }
  if (const TaskPtr* t = gates_.find(id)) return *t;
  for (const auto& [wid, w] : workers_) {
    for (const InFlight& f : w.ring) {
      if (f.task->id == id && !f.ended) return f.task;
    }
    for (const TaskPtr& t : w.backlog) {
      if (t->id == id) return t;
    }
  }
  return ledger_.find(id);
}

std::vector<TaskPtr> PoolCore::list_tasks(const std::function<bool(const TaskRecord&)>& keep,
                                          std::size_t limit) const {
  std::vector<TaskPtr> out;
  const auto take = [&](const TaskPtr& t) {
    if (out.size() < limit && keep(*t)) out.push_back(t);
  };
  queue_.for_each(take);
  gates_.for_each(take);
  for (const RetryEntry& e : retries_.entries()) {
    if (!e.task->decided) take(e.task);
  }
  for (const RetryEntry& e : scheduled_.entries()) {
    if (!e.task->decided) take(e.task);
  }
  for (const auto& [wid, w] : workers_) {
    for (const InFlight& f : w.ring) {
      if (!f.ended) take(f.task);
    }
    for (const TaskPtr& t : w.backlog) take(t);
  }
  ledger_.for_each(take, [&] { return out.size() < limit; });
  return out;
}

PoolStats PoolCore::stats() const {
  PoolStats s = stats_;
  s.queued = queue_.size();
  s.queued += backlogged_ + gates_.parked();
  s.throttled = gates_.parked();
  s.in_flight = in_flight_total_;
  s.retry_wait = retries_.size();
  s.scheduled = scheduled_.size();
  s.letters_pending = ledger_.letters_pending();
  s.workers = static_cast<std::uint32_t>(workers_.size());
  s.target_workers = workers_.target();
  s.target_reason = target_reason_;
  s.queue_wait_ms =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, autoscaler_.queue_wait_ns())) /
      detail::kMsNs;
  s.dispatch = dispatcher_.strategy();
  s.crash_loop = workers_.crash_loop();
  s.state = failed_                 ? "failed"
            : closing_              ? (workers_.empty() ? "closed" : "closing")
            : workers_.crash_loop() ? "crash_loop"
                                    : "running";
  return s;
}

}  // namespace sandpool::core
