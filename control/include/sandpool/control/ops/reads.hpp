// The reads: status, version, workers, stats, events (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/control/ops/op_info.hpp>
#include <sandpool/control/ops/schedules.hpp>
#include <sandpool/task/pool_counts.hpp>
#include <sandpool/task/redis_counts.hpp>
#include <sandpool/task/store_stats.hpp>

namespace sandpool::ops {

// `workers`, `stats`: one pool, or every pool when empty (then absent on the wire).
struct PoolFilterArgs {
  std::string pool;
};

// `status`: one pool's line.
struct PoolStatus {
  std::string name;
  std::string state;
  std::string dispatch;
  std::vector<std::string> task_types;
  std::uint32_t workers = 0;
  std::uint32_t target_workers = 0;
  std::uint64_t queued = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t scheduled = 0;  // waiting for their not_before
  std::uint64_t throttled = 0;  // queued, held back by a rate limit or a type's cap
};

// `status`: the dead-letter store's figures; the reply carries its gauges and the counters
// kDeadLetterStoreCounters names a status_name (<sandpool/task/store_stats.hpp>).
using DeadLetterStoreStatus = DeadLetterStoreStats;

// `status`: the task journal: its figures kTaskJournalStats names a status_name
// (<sandpool/task/store_stats.hpp>; the others stay 0 in a decoded reply) and the service's
// view of them.
struct JournalStatus : TaskJournalStats {
  std::string sync;                  // normal, full
  std::uint64_t mean_commit_us = 0;  // total_commit_us / commits
  // Why submits are refused now (the last refusal is newer than the last commit); empty: none.
  std::string storage_error;
};

// `status`: the Redis pools (docs/redis-pools.md): the server, this node, and per pool what
// Redis holds for the whole cluster beside what this node did.
struct RedisConsumerStatus {
  std::string name;  // a node
  std::uint64_t pending = 0;
  std::int64_t idle_ms = 0;
  bool alive = false;  // its heartbeat key exists
};
struct RedisPoolStatus : RedisNodeCounts {  // this node's: kRedisNodeCounts
  std::string name;
  // The cluster's, in Redis.
  std::uint64_t stream_length = 0;  // entries waiting or running
  std::uint64_t pending = 0;        // of them, read by a node and not ended
  std::uint64_t later = 0;          // waiting out a backoff, or scheduled
  std::uint64_t finished = 0;       // kept for lookups
  std::uint64_t dead_letters = 0;
  std::vector<RedisConsumerStatus> consumers;
};
struct RedisStatus {
  std::string address;
  std::string node;
  bool up = false;
  std::string last_error;
  std::vector<RedisPoolStatus> pools;
};

struct StatusReply {
  std::int32_t pid = 0;
  std::int64_t started_ms = 0;
  bool stopping = false;
  std::vector<PoolStatus> pools;
  DeadLetterStoreStatus dead_letter_store;
  std::optional<JournalStatus> journal;  // empty: service.journal is off
  std::optional<RedisStatus> redis;      // empty: no Redis pool
  std::uint64_t events_dropped = 0;
  std::uint64_t idempotency_keys = 0;
  std::uint64_t idempotency_kept_bytes = 0;
  // The HTTP listener's address ("host:port", service.http); empty when none (yet).
  std::string http;
  std::vector<ScheduleInfo> schedules;  // docs/schedules.md; empty (absent on the wire): none
};

// `workers`: one worker (WorkerInfo with the figures poold reads from /proc).
struct WorkerStatus {
  std::string pool;
  std::uint32_t slot = 0;
  std::int32_t pid = 0;
  std::string state;
  std::uint32_t in_flight = 0;
  std::uint64_t tasks_done = 0;
  std::int64_t uptime_ms = 0;
  std::uint64_t rss_bytes = 0;
  std::int64_t cpu_ms = 0;
  std::optional<std::int64_t> last_beat_ms;  // wall clock; null before the first heartbeat
  std::uint64_t restarts = 0;
  std::string isolation;
};

// A pool's worker target and why it is what it is (the autoscaler's last step, a scale).
struct PoolTarget {
  std::string pool;
  std::uint32_t target_workers = 0;
  std::uint32_t min = 0, max = 0;  // workers.min / workers.max
  bool autoscale = false;
  std::string reason;  // PoolStats::target_reason
};

struct WorkersReply {
  std::vector<WorkerStatus> workers;
  std::vector<PoolTarget> pools;  // one per pool asked about
};

// Latency quantiles in ms; null when no task was measured.
struct Quantiles {
  std::optional<double> p50;
  std::optional<double> p90;  // absent from queue_wait_ms
  std::optional<double> p99;
};

// `stats`: a tenant's tasks waiting (queued or scheduled) in one pool.
struct TenantWaiting {
  std::string tenant;  // "": the default tenant (counted only with queue.max_per_tenant)
  std::uint64_t waiting = 0;
};

// `stats`: one pool's counts (kPoolGauges and kPoolCounters, <sandpool/task/pool_counts.hpp>),
// state and latencies.
struct PoolCounters : PoolCounts {
  std::string name;
  std::string state;
  bool crash_loop = false;
  std::uint32_t workers = 0, target_workers = 0;
  Quantiles latency_ms;     // p50, p90, p99
  Quantiles queue_wait_ms;  // p50, p99
  // The tenants with the most tasks waiting, most first, at most 100 (kMetricsTenants).
  std::vector<TenantWaiting> tenants;
};

struct StatsReply {
  std::vector<PoolCounters> pools;
};

// `events`: the stream's filter; follow=false: the recent events, then the final reply.
struct EventsArgs {
  std::string pool;  // empty: every pool
  bool follow = false;
};

// `events`: one event frame, a pool's lifecycle event (docs/protocol.md, "events"). The
// members an event does not have are empty (then absent on the wire).
struct PoolEventRecord {
  // worker_started, worker_ready, worker_exited, attempt_ended, task_ended, scaled
  std::string event;
  std::string pool;
  std::int64_t time_ms = 0;  // wall clock
  std::optional<std::int32_t> pid;
  std::optional<std::uint64_t> task_id;
  std::optional<std::uint32_t> attempt;   // attempt_ended: its number
  std::optional<std::uint32_t> attempts;  // task_ended: how many the task had
  std::optional<std::uint32_t> workers;   // scaled: the new worker target (detail: why)
  std::optional<std::string> outcome;     // worker_exited, attempt_ended
  std::optional<std::string> state;       // task_ended
  std::optional<std::string> reason;      // task_ended
  std::optional<std::string> detail;
  std::optional<std::uint64_t> dropped;  // events this stream missed just before this one
};

// `version`: what poold is (its release and the protocol it speaks).
struct VersionReply {
  std::string version;         // poold's release, as in sandpool_info{version} of /metrics
  std::uint32_t protocol = 0;  // the control protocol's version (also in the hello)
};

// (not `Status`: that would hide sandpool::Status in this namespace)
struct ServerStatus {
  static constexpr std::string_view kName = "status";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kServer;
  using Args = NoArgs;
  using Reply = StatusReply;
};
struct Workers {
  static constexpr std::string_view kName = "workers";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = PoolFilterArgs;
  using Reply = WorkersReply;
};
struct Stats {
  static constexpr std::string_view kName = "stats";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kReads;
  using Args = PoolFilterArgs;
  using Reply = StatsReply;
};
struct Version {
  static constexpr std::string_view kName = "version";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kServer;
  using Args = NoArgs;
  using Reply = VersionReply;
};
struct Events {
  static constexpr std::string_view kName = "events";
  static constexpr Rights kRights = Rights::kRead;
  static constexpr Lane kLane = Lane::kServer;
  static constexpr bool kStream = true;
  using Args = EventsArgs;
  using Reply = EmptyReply;
  using Event = PoolEventRecord;
};

}  // namespace sandpool::ops
