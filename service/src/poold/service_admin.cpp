// Service: status, stats, workers and the pool controls (scale, strategy, drain, resume,
// restart, kill_worker).
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include <sandpool/pool/pool_metrics.hpp>

#include <sandpool/control/frame_codec.hpp>
#include <sandpool/pool/proc_stats.hpp>
#include <sandpool/service/service.hpp>

namespace sandpool::poold {
namespace {

// "round-robin, least-loaded, ... or by-key": the names parse_strategy takes, spelt by the
// to_string it compares with, so the error cannot suggest a name that is refused.
std::string strategy_names() {
  const auto& all = kDispatchStrategies;
  std::string names;
  for (std::size_t i = 0; i < std::size(all); ++i) {
    if (i > 0) names += i + 1 == std::size(all) ? " or " : ", ";
    names += to_string(all[i]);
  }
  return names;
}

// The reply of a pool control that did `st` to `pool`: its error, or the pool's state.
template <class Op>
void answer_pool_control(const Status& st, const std::string& name, Pool& pool,
                         const OpResponder<Op>& res) {
  if (!st) return (void)res.error(st);
  res.ok({name, pool.stats().state});
}

// The q-quantile of a histogram in ms, as the upper bound of the bucket that reaches it
// (Prometheus' histogram_quantile without the interpolation); none when empty.
std::optional<double> quantile_ms(const Histogram& h, double q) {
  if (h.count() == 0) return std::nullopt;
  const auto want = static_cast<std::uint64_t>(q * static_cast<double>(h.count()) + 0.5);
  for (std::size_t i = 0; i < Histogram::kBoundsNs.size(); ++i) {
    if (h.cumulative(i) >= want) return static_cast<double>(Histogram::kBoundsNs[i]) / 1e6;
  }
  return static_cast<double>(Histogram::kBoundsNs.back()) / 1e6;  // beyond the last bound
}

ops::PoolCounters pool_counters(const std::string& name, const PoolMetrics& m) {
  const PoolStats& s = m.stats;
  ops::PoolCounters c;
  c.name = name;
  c.state = s.state;
  static_cast<PoolCounts&>(c) = s;  // the counts kPoolGauges and kPoolCounters name
  c.crash_loop = s.crash_loop;
  c.workers = s.workers;
  c.target_workers = s.target_workers;
  c.latency_ms = {quantile_ms(m.end_to_end, 0.50), quantile_ms(m.end_to_end, 0.90),
                  quantile_ms(m.end_to_end, 0.99)};
  c.queue_wait_ms = {quantile_ms(m.queue_wait, 0.50), std::nullopt,
                     quantile_ms(m.queue_wait, 0.99)};
  for (const auto& [tenant, n] : m.tenants_waiting) c.tenants.push_back({tenant, n});
  return c;
}

}  // namespace

void Service::serve(const Request&, const ops::NoArgs&, const OpResponder<ops::ServerStatus>& res) {
  ops::StatusReply r;
  for (const auto& [name, pool] : this->pools()) {
    const PoolStats s = pool->stats_snapshot();  // never waits behind a batch
    r.pools.push_back({name, s.state, std::string(to_string(s.dispatch)), pool->task_types(),
                       s.workers, s.target_workers, s.queued, s.in_flight, s.scheduled,
                       s.throttled});
  }
  r.pid = ::getpid();
  r.started_ms = started_ms_;
  r.stopping = stopping_.load();
  r.dead_letter_store = store_->stats();
  r.journal = journal_status();
  if (redis_) r.redis = redis_->status();
  r.events_dropped = hub_->dropped();
  r.idempotency_keys = idempotency_.size();
  r.idempotency_kept_bytes = idempotency_.kept_bytes();
  {
    MutexLock lock(http_mu_);
    r.http = http_address_;
  }
  for (const ScheduleState& s : schedules()) r.schedules.push_back(schedule_info(s));
  res.ok(r);
}

void Service::serve(const Request&, const ops::NoArgs&, const OpResponder<ops::Version>& res) {
  res.ok(ops::VersionReply{SANDPOOL_VERSION, control::kProtocolVersion});
}

void Service::serve(const Request&, const ops::PoolFilterArgs& a,
                    const OpResponder<ops::Stats>& res) {
  ops::StatsReply r;
  if (!a.pool.empty()) {
    auto pool = pool_named(a.pool);
    if (!pool) return (void)res.error(pool.status());
    r.pools.push_back(pool_counters(a.pool, (*pool)->metrics()));
  } else {
    for (const auto& [name, pool] : pools())
      r.pools.push_back(pool_counters(name, pool->metrics()));
  }
  res.ok(r);
}

void Service::serve(const Request&, const ops::PoolFilterArgs& a,
                    const OpResponder<ops::Workers>& res) {
  const std::string& only = a.pool;
  if (!only.empty()) {
    if (auto p = pool_named(only); !p) return (void)res.error(p.status());
  }
  ops::WorkersReply r;
  // Not under mu_: Pool::workers() waits for the pool's loop thread, which takes mu_ when a
  // task ends (a deadlock: the lock rule in service.hpp).
  for (const auto& [name, pool] : pools()) {
    if (!only.empty() && name != only) continue;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    // What the worker reported once ready (it knows what the kernel granted), with what the
    // manager set up around it; while it starts, what the pool is configured for.
    const std::string& configured = pool->isolation();
    for (const WorkerInfo& w : pool->workers()) {
      ops::WorkerStatus ws;
      ws.pool = name;
      ws.slot = w.slot;
      ws.pid = w.pid;
      ws.state = w.state;
      ws.in_flight = w.in_flight;
      ws.tasks_done = w.tasks_done;
      ws.uptime_ms = w.uptime_ms;
      ws.rss_bytes = supervision::rss_bytes(w.pid);
      ws.cpu_ms = supervision::cpu_ns(w.pid) / 1000000;
      if (w.last_beat_ago_ms >= 0) ws.last_beat_ms = now_ms - w.last_beat_ago_ms;
      ws.restarts = w.restarts;
      ws.isolation = w.isolation.empty() ? configured : w.isolation;
      r.workers.push_back(std::move(ws));
    }
    const PoolStats s = pool->stats();
    if (auto configured = controlled_pool(name)) {
      const PoolConfig& pc = configured->first;
      r.pools.push_back({name, s.target_workers, pc.worker_bounds.min, pc.worker_bounds.max,
                         pc.autoscale.enabled, s.target_reason});
    }
  }
  res.ok(r);
}

Result<std::pair<PoolConfig, std::shared_ptr<Pool>>> Service::controlled_pool(
    const std::string& name) {
  MutexLock lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return Status::error(Code::kNotFound, "no pool named '" + name + "'");
  return std::make_pair(it->second.config, it->second.pool);
}

void Service::serve(const Request&, const ops::ScaleArgs& a, const OpResponder<ops::Scale>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  const PoolConfig& pc = p->first;
  if (a.workers < pc.worker_bounds.min || a.workers > pc.worker_bounds.max) {
    return (void)res.error(Status::invalid(
        "workers: " + std::to_string(a.workers) + " is outside the pool's workers.min..max (" +
        std::to_string(pc.worker_bounds.min) + ".." + std::to_string(pc.worker_bounds.max) + ")"));
  }
  answer_pool_control(p->second->scale(a.workers), a.pool, *p->second, res);
}

void Service::serve(const Request&, const ops::StrategyArgs& a,
                    const OpResponder<ops::Strategy>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  auto s = parse_strategy(a.strategy);
  if (!s) return (void)res.error(Status::invalid("strategy: " + strategy_names()));
  answer_pool_control(p->second->set_strategy(*s), a.pool, *p->second, res);
}

void Service::serve(const Request&, const ops::PoolArgs& a, const OpResponder<ops::Drain>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->drain();
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::serve(const Request&, const ops::PoolArgs& a, const OpResponder<ops::Resume>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->resume();
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::serve(const Request&, const ops::RestartArgs& a,
                    const OpResponder<ops::Restart>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->restart(a.rolling);
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::serve(const Request&, const ops::KillWorkerArgs& a,
                    const OpResponder<ops::KillWorker>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  answer_pool_control(p->second->kill_worker(a.pid, a.signal), a.pool, *p->second, res);
}

}  // namespace sandpool::poold
