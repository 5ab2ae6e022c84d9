// RedisNodeCounts: what one node did for one Redis pool (docs/redis-pools.md), with the one
// table of them (StatDef, stat_table.hpp) that the `status` reply's `redis.pools` writes
// (<sandpool/control/op_json.hpp>, in ops::RedisPoolStatus) and the sandpool_redis_* series
// export (<sandpool/metrics/metrics.hpp>, in RedisPoolFigures). poold converts a feeder's
// figures (redis::FeederStats) into them in one place. Here in the task library, below the
// protocol and the metrics alike.
#pragma once

#include <cstdint>

#include <sandpool/task/stat_table.hpp>

namespace sandpool {

// Described in kRedisNodeCounts.
struct RedisNodeCounts {
  std::uint64_t held = 0;
  std::uint64_t read = 0, claimed = 0, finished_here = 0, fenced = 0, released = 0;
  std::uint64_t malformed = 0, deferred = 0, throttled = 0, throttle_waits = 0;
};

// In the order the metrics list them (after sandpool_redis_up, docs/metrics.md).
inline constexpr StatDef<RedisNodeCounts> kRedisNodeCounts[] = {
    {&RedisNodeCounts::held, "held", "sandpool_redis_held",
     "Entries of the pool's stream this node runs now.", MetricType::kGauge},
    {&RedisNodeCounts::read, "read", "sandpool_redis_read_total",
     "Entries this node read from the pool's stream."},
    {&RedisNodeCounts::claimed, "claimed", "sandpool_redis_claimed_total",
     "Entries this node claimed from dead nodes (each with a lost attempt)."},
    {&RedisNodeCounts::finished_here, "finished_here", "sandpool_redis_finished_total",
     "Task ends this node wrote to Redis."},
    {&RedisNodeCounts::fenced, "fenced", "sandpool_redis_fenced_total",
     "Writes refused because the entry was no longer this node's (another claimed it)."},
    {&RedisNodeCounts::released, "released", "sandpool_redis_released_total",
     "Entries handed back unrun (refused while draining, or stopped by a shutdown)."},
    {&RedisNodeCounts::malformed, "malformed", "sandpool_redis_malformed_total",
     "Entries that were not tasks, discarded."},
    {&RedisNodeCounts::deferred, "deferred", "sandpool_redis_deferred_total",
     "Failed attempts whose task was sent to wait out its backoff in Redis (any node runs the "
     "next attempt)."},
    {&RedisNodeCounts::throttled, "throttled", "sandpool_redis_throttled_total",
     "Tasks over a task type's or tenant's rate limit (the cluster's), sent to wait in Redis's "
     "later set, unrun."},
    {&RedisNodeCounts::throttle_waits, "throttle_waits", "sandpool_redis_throttle_waits_total",
     "Times this node's reading waited for the pool's rate limit (the cluster's)."},
};

}  // namespace sandpool
