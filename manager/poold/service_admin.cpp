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

void Service::op_pool_control(const Request& req, const Responder& res) {
  const std::string name = pool_arg(req);
  if (name.empty()) return (void)res.error("bad_request", "pool: required");
  PoolConfig pc;
  std::shared_ptr<Pool> pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(name);
    if (it == slots_.end()) return (void)res.error("not_found", "no pool named '" + name + "'");
    pc = it->second.config;
    pool = it->second.pool;
  }
  const std::string& op = req.op;
  Status st;
  if (op == "scale") {
    auto n = req.args.find("workers");
    if (n == req.args.end() || !n->is_number_unsigned()) {
      return (void)res.error("bad_request", "workers: a count");
    }
    const auto want = n->get<std::uint32_t>();
    if (want < pc.worker_bounds.min || want > pc.worker_bounds.max) {
      return (void)res.error("bad_request", "workers: " + std::to_string(want) +
                                                " is outside the pool's workers.min..max (" +
                                                std::to_string(pc.worker_bounds.min) + ".." +
                                                std::to_string(pc.worker_bounds.max) + ")");
    }
    st = pool->scale(want);
  } else if (op == "strategy") {
    auto s = parse_strategy(req.args.value("strategy", std::string()));
    if (!s) {
      return (void)res.error("bad_request", "strategy: " + strategy_names());
    }
    st = pool->set_strategy(*s);
  } else if (op == "drain") {
    pool->drain();
  } else if (op == "resume") {
    pool->resume();
  } else if (op == "restart") {
    pool->restart(req.args.value("rolling", false));
  } else if (op == "kill_worker") {
    auto pid = req.args.find("pid");
    if (pid == req.args.end() || !pid->is_number_integer()) {
      return (void)res.error("bad_request", "pid: a worker's pid");
    }
    st = pool->kill_worker(pid->get<std::int32_t>(), req.args.value("signal", 9));
  } else {
    return (void)res.error("internal", "unhandled op " + op);
  }
  if (!st) return (void)res.error(st);
  res.ok({{"pool", name}, {"state", pool->stats().state}});
}

}  // namespace sandpool::poold
