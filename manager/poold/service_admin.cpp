// Service: status, stats, workers and the pool controls (scale, strategy, drain, resume,
// restart, kill_worker).
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <string>
#include <utility>

#include <sandpool/pool_metrics.hpp>

#include "poold/service.hpp"
#include "supervision/proc_stats.hpp"

namespace sandpool::poold {
namespace {

using nlohmann::json;

// "round-robin, least-loaded, random or affinity": the names parse_strategy takes, spelt by
// the to_string it compares with, so the error cannot suggest a name that is refused.
std::string strategy_names() {
  const DispatchStrategy all[] = {DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded,
                                  DispatchStrategy::kRandom, DispatchStrategy::kAffinity};
  std::string names;
  for (std::size_t i = 0; i < std::size(all); ++i) {
    if (i > 0) names += i + 1 == std::size(all) ? " or " : ", ";
    names += to_string(all[i]);
  }
  return names;
}

json stats_json(const PoolStats& s) {
  return {{"state", s.state},
          {"submitted", s.submitted},
          {"completed", s.completed},
          {"dead_lettered", s.dead_lettered},
          {"cancelled", s.cancelled},
          {"retried", s.retried},
          {"lost", s.lost},
          {"restarts", s.restarts},
          {"recycled", s.recycled},
          {"expired", s.expired},
          {"heartbeat_kills", s.heartbeat_kills},
          {"output_dropped", s.output_dropped},
          {"letters_pending", s.letters_pending},
          {"crash_loop", s.crash_loop},
          {"queued", s.queued},
          {"in_flight", s.in_flight},
          {"retry_wait", s.retry_wait},
          {"workers", s.workers},
          {"target_workers", s.target_workers}};
}

std::string pool_arg(const Request& req) { return req.args.value("pool", std::string()); }

// The reply of a pool control that did `st` to `pool`: its error, or the pool's state.
template <class Op>
void answer_pool_control(const Status& st, const std::string& name, Pool& pool,
                         const OpResponder<Op>& res) {
  if (!st) return (void)res.error(st);
  res.ok({name, pool.stats().state});
}

// The q-quantile of a histogram in ms, as the upper bound of the bucket that reaches it
// (Prometheus' histogram_quantile without the interpolation); null when empty.
json quantile_ms(const Histogram& h, double q) {
  if (h.count() == 0) return nullptr;
  const auto want = static_cast<std::uint64_t>(q * static_cast<double>(h.count()) + 0.5);
  for (std::size_t i = 0; i < Histogram::kBoundsNs.size(); ++i) {
    if (h.cumulative(i) >= want) return static_cast<double>(Histogram::kBoundsNs[i]) / 1e6;
  }
  return static_cast<double>(Histogram::kBoundsNs.back()) / 1e6;  // beyond the last bound
}

json pool_stats_json(const std::string& name, const PoolMetrics& m) {
  json j = stats_json(m.stats);
  j["name"] = name;
  j["latency_ms"] = {{"p50", quantile_ms(m.end_to_end, 0.50)},
                     {"p90", quantile_ms(m.end_to_end, 0.90)},
                     {"p99", quantile_ms(m.end_to_end, 0.99)}};
  j["queue_wait_ms"] = {{"p50", quantile_ms(m.queue_wait, 0.50)},
                        {"p99", quantile_ms(m.queue_wait, 0.99)}};
  return j;
}

}  // namespace

void Service::op_status(const Request&, const Responder& res) {
  json pools = json::array();
  for (const auto& [name, pool] : this->pools()) {
    const PoolStats s = pool->stats_snapshot();  // never waits behind a batch
    pools.push_back({{"name", name},
                     {"state", s.state},
                     {"dispatch", std::string(to_string(s.dispatch))},
                     {"task_types", pool->task_types()},
                     {"workers", s.workers},
                     {"target_workers", s.target_workers},
                     {"queued", s.queued},
                     {"in_flight", s.in_flight}});
  }
  const DeadLetterStoreStats d = store_->stats();
  res.ok({{"pid", ::getpid()},
          {"started_ms", started_ms_},
          {"stopping", stopping_.load()},
          {"pools", std::move(pools)},
          {"dead_letter_store",
           {{"written", d.written},
            {"pending", d.pending},
            {"oldest_pending_ms", d.oldest_pending_ms},
            {"writes_failing", d.writes_failing},
            {"last_write_error", d.last_write_error},
            {"write_errors", d.write_errors},
            {"spilled", d.spilled},
            {"spill_files", d.spill_files},
            {"recent_spill_files", d.recent_spill_files},
            {"lost", d.lost}}},
          {"events_dropped", hub_->dropped()},
          {"idempotency_keys", idempotency_.size()},
          {"idempotency_kept_bytes", idempotency_.kept_bytes()}});
}

void Service::op_stats(const Request& req, const Responder& res) {
  json out = json::array();
  const std::string only = pool_arg(req);
  if (!only.empty()) {
    auto pool = pool_named(only);
    if (!pool) return (void)res.error(pool.status());
    out.push_back(pool_stats_json(only, (*pool)->metrics()));
  } else {
    for (const auto& [name, pool] : pools()) out.push_back(pool_stats_json(name, pool->metrics()));
  }
  res.ok({{"pools", std::move(out)}});
}

void Service::op_workers(const Request& req, const Responder& res) {
  const std::string only = pool_arg(req);
  if (!only.empty()) {
    if (auto p = pool_named(only); !p) return (void)res.error(p.status());
  }
  json out = json::array();
  // Not under mu_: Pool::workers() waits for the pool's loop thread, which takes mu_ when a
  // task ends (the deadlock of issue 11).
  for (const auto& [name, pool] : pools()) {
    if (!only.empty() && name != only) continue;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    // What the worker reported once ready (it knows what the kernel granted), with what the
    // manager set up around it; while it starts, what the pool is configured for.
    const std::string& configured = pool->isolation();
    for (const WorkerInfo& w : pool->workers()) {
      out.push_back({{"pool", name},
                     {"slot", w.slot},
                     {"pid", w.pid},
                     {"state", w.state},
                     {"in_flight", w.in_flight},
                     {"tasks_done", w.tasks_done},
                     {"uptime_ms", w.uptime_ms},
                     {"rss_bytes", supervision::rss_bytes(w.pid)},
                     {"cpu_ms", supervision::cpu_ns(w.pid) / 1000000},
                     {"last_beat_ms",
                      w.last_beat_ago_ms < 0 ? json(nullptr) : json(now_ms - w.last_beat_ago_ms)},
                     {"restarts", w.restarts},
                     {"isolation", w.isolation.empty() ? configured : w.isolation}});
    }
  }
  res.ok({{"workers", std::move(out)}});
}

Result<std::pair<PoolConfig, std::shared_ptr<Pool>>> Service::controlled_pool(
    const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return Status::error(Code::kNotFound, "no pool named '" + name + "'");
  return std::make_pair(it->second.config, it->second.pool);
}

void Service::op_scale(const Request&, const ops::ScaleArgs& a,
                       const OpResponder<ops::Scale>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  const PoolConfig& pc = p->first;
  if (a.workers < pc.workers.min || a.workers > pc.workers.max) {
    return (void)res.error(Status::invalid(
        "workers: " + std::to_string(a.workers) + " is outside the pool's workers.min..max (" +
        std::to_string(pc.workers.min) + ".." + std::to_string(pc.workers.max) + ")"));
  }
  answer_pool_control(p->second->scale(a.workers), a.pool, *p->second, res);
}

void Service::op_strategy(const Request&, const ops::StrategyArgs& a,
                          const OpResponder<ops::Strategy>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  auto s = parse_strategy(a.strategy);
  if (!s) return (void)res.error(Status::invalid("strategy: " + strategy_names()));
  answer_pool_control(p->second->set_strategy(*s), a.pool, *p->second, res);
}

void Service::op_drain(const Request&, const ops::PoolArgs& a, const OpResponder<ops::Drain>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->drain();
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::op_resume(const Request&, const ops::PoolArgs& a,
                        const OpResponder<ops::Resume>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->resume();
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::op_restart(const Request&, const ops::RestartArgs& a,
                         const OpResponder<ops::Restart>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  p->second->restart(a.rolling);
  answer_pool_control(Status::ok(), a.pool, *p->second, res);
}

void Service::op_kill_worker(const Request&, const ops::KillWorkerArgs& a,
                             const OpResponder<ops::KillWorker>& res) {
  auto p = controlled_pool(a.pool);
  if (!p) return (void)res.error(p.status());
  answer_pool_control(p->second->kill_worker(a.pid, a.signal), a.pool, *p->second, res);
}

}  // namespace sandpool::poold
