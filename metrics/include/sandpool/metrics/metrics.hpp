// Prometheus monitoring: the text exposition of the pools' metrics (docs/metrics.md lists
// every series) and the HTTP endpoint that serves it with /healthz beside it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/pool/pool_metrics.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>
#include <sandpool/task/redis_counts.hpp>

namespace sandpool {

// About the service as a whole (rendered once, not per pool).
// One Redis pool as this node sees it (docs/redis-pools.md): the sandpool_redis_* series.
// Its counts: kRedisNodeCounts (<sandpool/task/redis_counts.hpp>).
struct RedisPoolFigures : RedisNodeCounts {
  std::string pool;
  bool up = false;  // the node's last call to Redis for the pool succeeded
};

// One periodic schedule (docs/schedules.md): the sandpool_schedule_* series.
struct ScheduleFigures {
  std::string schedule;
  std::uint64_t fired = 0, skipped = 0;
  std::optional<std::int64_t> next_s;  // the next slot, Unix seconds; none: paused or ended
};

struct ServiceInfo {
  std::string version;             // sandpool_info{version="..."}
  std::int64_t start_time_ms = 0;  // wall clock, ms since the epoch
  // The dead-letter store's sandpool_dead_letter* series; none when empty.
  std::optional<DeadLetterStoreStats> dead_letter_store{};
  // The task journal's sandpool_journal_* series; none when empty (no journal).
  std::optional<TaskJournalStats> journal{};
  // The Redis pools' series; none when empty (no Redis pool).
  std::vector<RedisPoolFigures> redis{};
  // The schedules' series; none when empty (no schedule).
  std::vector<ScheduleFigures> schedules{};
};

// Returns the Prometheus text exposition (format 0.0.4) of `pools`, in the order given, every
// family with its HELP and TYPE lines, durations in seconds. Pure: same input, same text.
std::string render_prometheus(const std::vector<PoolMetrics>& pools, const ServiceInfo& service);

// Returns `value` escaped for a label value in the text format (backslash, double quote and
// newline as \\, \" and \n).
std::string escape_label_value(std::string_view value);

// An HTTP server on its own threads answering GET /metrics (text from the metrics callback)
// and GET /healthz (200 "ok", or 503 with the reason the health callback gives).
//
// Thread-safety: the callbacks run on the server's threads, possibly two at once, for as long
// as the server runs; they must be thread-safe and must not call stop(). port(), address()
// and stop() may be called from any thread but not from the callbacks.
// Lifetime: ~MetricsServer() calls stop(); once stop() returns no callback runs any more.
class MetricsServer {
 public:
  using TextSource = std::function<std::string()>;
  // Returns nullopt when healthy, otherwise why not (the 503 body).
  using HealthCheck = std::function<std::optional<std::string>()>;

  // Binds `listen` ("host:port", "[v6 host]:port"; port 0 picks a free port) and starts
  // serving. Errors: kInvalidArgument (malformed address), kSystem (cannot bind).
  static Result<std::unique_ptr<MetricsServer>> start(std::string_view listen, TextSource metrics,
                                                      HealthCheck health);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port actually bound (the chosen one when asked for 0).
  std::uint16_t port() const { return port_; }
  // "host:port" as bound, the form the logs and docs use.
  std::string address() const;
  // Stops listening, waits for the serving threads to end. Idempotent.
  void stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl, std::string host, std::uint16_t port);
  std::unique_ptr<Impl> impl_;
  std::string host_;
  std::uint16_t port_ = 0;
};

}  // namespace sandpool
