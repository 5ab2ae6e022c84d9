// PoolCounts: a pool's task and worker counts as plain data, with the tables of them (StatDef,
// stat_table.hpp) that the `stats` reply writes (<sandpool/control/op_json.hpp>, which holds
// them in ops::PoolCounters) and the Prometheus text exports (<sandpool/metrics/metrics.hpp>,
// from PoolMetrics::stats): a count is named here once. The pool counts into them (its
// PoolStats, <sandpool/pool/pool.hpp>, is a PoolCounts). Here in the task library, below the
// pool and the protocol alike.
#pragma once

#include <cstdint>

#include <sandpool/task/stat_table.hpp>

namespace sandpool {

// Described in kPoolGauges and kPoolCounters.
struct PoolCounts {
  std::uint64_t submitted = 0, completed = 0, dead_lettered = 0, cancelled = 0;
  std::uint64_t retried = 0, lost = 0, restarts = 0, recycled = 0, expired = 0;
  std::uint64_t heartbeat_kills = 0;
  std::uint64_t output_dropped = 0;
  std::uint64_t letters_pending = 0;
  std::uint64_t queued = 0, in_flight = 0, retry_wait = 0;
  std::uint64_t scheduled = 0;
  std::uint64_t throttled = 0;
};

// The gauges, the first of a pool's series (docs/metrics.md's order).
inline constexpr StatDef<PoolCounts> kPoolGauges[] = {
    {&PoolCounts::queued, "queued", "sandpool_queue_depth",
     "Tasks waiting for a worker (the queue and the affinity backlogs).", MetricType::kGauge},
    {&PoolCounts::in_flight, "in_flight", "sandpool_tasks_in_flight",
     "Tasks handed to a worker and not yet ended.", MetricType::kGauge},
    {&PoolCounts::retry_wait, "retry_wait", "sandpool_tasks_retry_waiting",
     "Tasks waiting out their retry backoff.", MetricType::kGauge},
    {&PoolCounts::scheduled, "scheduled", "sandpool_tasks_scheduled",
     "Tasks waiting for their not_before (state scheduled; counted in queue.capacity).",
     MetricType::kGauge},
    {&PoolCounts::throttled, "throttled", "sandpool_tasks_throttled",
     "Queued tasks held back by a rate limit or a type's concurrency cap (of the queue depth).",
     MetricType::kGauge},
};

// The counters, in the order the metrics list them, then the one they do not. The metric of
// `dead_lettered` is split by reason and `sandpool_attempts_total` (by outcome, no count of
// its own here) follows `retried`: both come from PoolMetrics' arrays.
inline constexpr StatDef<PoolCounts> kPoolCounters[] = {
    {&PoolCounts::submitted, "submitted", "sandpool_tasks_submitted_total", "Tasks accepted."},
    {&PoolCounts::completed, "completed", "sandpool_tasks_completed_total",
     "Tasks that ended completed."},
    {&PoolCounts::dead_lettered, "dead_lettered", "sandpool_tasks_dead_lettered_total",
     "Tasks that ended dead-lettered, by reason."},
    {&PoolCounts::cancelled, "cancelled", "sandpool_tasks_cancelled_total",
     "Tasks that ended cancelled."},
    {&PoolCounts::retried, "retried", "sandpool_retries_total",
     "Retries scheduled: attempts that ended retryable with attempts left (to retry_wait)."},
    {&PoolCounts::restarts, "restarts", "sandpool_workers_restarted_total",
     "Workers replaced after exiting unasked (crash, kill, limit, violation)."},
    {&PoolCounts::lost, "lost", "sandpool_workers_lost_total",
     "Of those restarts, workers that died with no named cause (outcome lost)."},
    {&PoolCounts::recycled, "recycled", "sandpool_workers_recycled_total",
     "Workers retired on purpose by recycle.max_tasks or recycle.max_rss."},
    {&PoolCounts::heartbeat_kills, "heartbeat_kills", "sandpool_heartbeat_kills_total",
     "Workers killed for missing their heartbeats."},
    {&PoolCounts::output_dropped, "output_dropped", "sandpool_worker_output_dropped_total",
     "Worker output and plugin log lines dropped over the pool's output limit."},
    // A gauge, kept after the counters where it was first exposed (the order is documented).
    {&PoolCounts::letters_pending, "letters_pending", "sandpool_tasks_awaiting_dead_letter",
     "Tasks decided dead-lettered whose letter is not written yet (not terminal until it is).",
     MetricType::kGauge},
    {&PoolCounts::expired, "expired", "",
     "Tasks dead-lettered unrun past their queue_ttl (reason expired)."},
};

}  // namespace sandpool
