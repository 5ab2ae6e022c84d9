// Service: construction, the pools and routing (the dispatch of control requests:
// service_dispatch.cpp).
#include <sandpool/service/service.hpp>

#include <spdlog/logger.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include <sandpool/base/thread_name.hpp>
#include <sandpool/base/wall_clock.hpp>

#include "poold/backend_handover.hpp"

namespace sandpool::poold {
namespace {

std::string absolute(const std::string& path) {
  if (path.empty()) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace

void make_paths_absolute(Config& config) {
  config.service.socket_path = absolute(config.service.socket_path);
  config.service.state_dir = absolute(config.service.state_dir);
  config.service.http.read_token_file = absolute(config.service.http.read_token_file);
  config.service.http.admin_token_file = absolute(config.service.http.admin_token_file);
  for (PoolConfig& pc : config.pools) pc.plugin_path = absolute(pc.plugin_path);
}

Service::Service(Config config, std::string config_path, std::shared_ptr<spdlog::logger> log,
                 ShutdownRequest on_shutdown)
    : config_(std::move(config)),
      config_path_(std::move(config_path)),
      log_(std::move(log)),
      on_shutdown_(std::move(on_shutdown)),
      started_ms_(wall_clock_ms()),
      // Task ids are unique across pools (one counter) and across restarts: seeded from the
      // wall clock in ms * 1000, so a restart a millisecond later starts above any id the
      // previous run could reach at 1000 tasks per ms.
      task_ids_(std::make_shared<std::atomic<std::uint64_t>>(
          static_cast<std::uint64_t>(started_ms_) * 1000)),
      hub_(std::make_shared<EventHub>()),
      idempotency_({100000, config_.service.task_records_max_age, 64u << 20}) {}

Result<std::unique_ptr<Service>> Service::start(Config config, std::string config_path,
                                                std::shared_ptr<spdlog::logger> log,
                                                ShutdownRequest on_shutdown) {
  std::unique_ptr<Service> s(
      new Service(std::move(config), std::move(config_path), log, std::move(on_shutdown)));
  auto store = DeadLetterStore::open(store_options(s->config_, log));
  if (!store) return store.status().with_context("dead-letter store");
  s->store_ = std::shared_ptr<DeadLetterStore>(std::move(store).value());
  if (Status st = s->dead_letter_removed_pools(); !st) return st.with_context("task journal");
  const bool any_redis =
      std::any_of(s->config_.pools.begin(), s->config_.pools.end(),
                  [](const PoolConfig& pc) { return pc.backend == PoolConfig::Backend::kRedis; });
  if (any_redis) {
    auto o = RedisPools::options_from(s->config_.service, s->config_.service.state_dir);
    if (!o) return o.status();
    o->log = log;
    auto redis = RedisPools::start(std::move(o).value());
    if (!redis) return redis.status();
    s->redis_ = std::move(redis).value();
    log->info("redis at {} node={}", s->config_.service.redis.address, s->redis_->node());
  }
  for (const PoolConfig& pc : s->config_.pools) {
    auto pool = s->make_pool(pc, true);
    if (!pool) return pool.status().with_context("pool '" + pc.name + "'");
    if (Status st = s->attach_redis(pc, **pool); !st) {
      (void)(*pool)->shutdown(std::chrono::milliseconds(0));
      return st.with_context("pool '" + pc.name + "'");
    }
    {
      MutexLock lock(s->mu_);  // no other thread reads slots_ yet; taken for the checker
      s->slots_.emplace(pc.name, Slot{pc, std::move(pool).value()});
    }
    log->info("pool started pool={} plugin={} workers={}", pc.name, pc.plugin_path, pc.workers);
  }
  if (s->redis_ && s->journal() != nullptr) {
    // A pool that was local before this start left its unfinished tasks in the journal.
    if (Status st = hand_over_to_redis(*s->journal(), *s->redis_, s->config_, *log); !st) {
      return st.with_context("task journal: hand over to redis");
    }
  }
  s->refresh_watch_list();
  if (Status st = s->start_schedules(); !st) return st;
  return s;
}

Service::~Service() {
  stop_schedules();  // its thread submits into the pools
  std::vector<std::thread> retiring;
  {
    MutexLock lock(mu_);
    retiring.swap(retiring_);
  }
  for (auto& t : retiring) t.join();
  redis_.reset();  // its feeders run tasks in the pools
  // Closed here, while everything their tasks' callbacks reach (waiters_, the keys) exists.
  for (const auto& [name, pool] : pools()) pool->close();
}

PoolOptions Service::pool_options(const PoolConfig& pc) const {
  PoolOptions o = to_pool_options(pc);
  o.task_ids = task_ids_;
  o.dead_letter_store = store_;
  o.logger = log_;
  o.task_records_max = config_.service.task_records_max;
  o.task_records_max_age = config_.service.task_records_max_age;
  o.on_event = [hub = hub_, name = pc.name](const PoolEvent& e) { hub->publish(name, e); };
  o.shutdown_unfinished = config_.service.shutdown_unfinished;
  if (pc.backend == PoolConfig::Backend::kRedis) {
    // A Redis pool's rate limits are the cluster's: its feeder takes their tokens in Redis
    // (RedisPools::attach). Taken here too, each node would apply them again on its own.
    // Its concurrency_per_type stays here: a cap per node.
    o.flow.pool = RateLimit{};
    o.flow.task_types.clear();
    o.flow.tenants.clear();
    o.flow.type_concurrency.clear();  // the cluster's too: leases in Redis (the feeder's)
  }
  return o;
}

Result<std::shared_ptr<Pool>> Service::make_pool(const PoolConfig& pc, bool recover) {
  PoolOptions o = pool_options(pc);
  o.recover_unfinished = recover;
  if (pc.backend == PoolConfig::Backend::kRedis) {
    // Redis keeps its tasks and dead letters: nothing of it in the journal or the store.
    o.dead_letter_store = nullptr;
    o.recover_unfinished = false;
  }
  o.recovered_on_done = [this](std::uint64_t id, const std::string& key) {
    return recovered_on_done(id, key);
  };
  auto created = Pool::create(std::move(o));
  if (!created) return created.status();
  std::shared_ptr<Pool> pool(std::move(created).value());
  // Routing is by type: a type served by two pools would go to whichever sorts first, so a
  // plugin could capture another pool's tasks by declaring its type. The other pool keeps
  // it; this one does not start (a replacement of the same name may share its types).
  std::string clash;
  {
    MutexLock lock(mu_);
    for (const auto& [name, slot] : slots_) {
      if (name == pc.name || !clash.empty()) continue;
      const auto& theirs = slot.pool->task_types();
      for (const std::string& t : pool->task_types()) {
        if (std::find(theirs.begin(), theirs.end(), t) == theirs.end()) continue;
        clash = "task type '" + t + "' of pool '" + pc.name + "' is already served by pool '" +
                name + "'" + (pc.task_types.empty() ? " (the plugin declares it)" : "");
        break;
      }
    }
  }
  if (!clash.empty()) {
    (void)pool->shutdown(std::chrono::milliseconds(0));
    return Status::error(Code::kPlugin, clash);
  }
  return pool;
}

Status Service::attach_redis(const PoolConfig& pc, Pool& pool) {
  if (pc.backend != PoolConfig::Backend::kRedis) return Status::ok();
  if (!redis_) {
    return Status::invalid(
        "backend redis: service.redis was not configured at start (a restart "
        "of poold sets it up)");
  }
  return redis_->attach(pc, pool);
}

Result<std::shared_ptr<Pool>> Service::pool_named(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return Status::error(Code::kNotFound, "no pool named '" + name + "'");
  return it->second.pool;
}

Result<std::shared_ptr<Pool>> Service::route(const std::string& pool,
                                             const std::string& type) const {
  if (!pool.empty()) return pool_named(pool);
  for (const auto& [name, p] : pools()) {
    const auto& types = p->task_types();
    if (std::find(types.begin(), types.end(), type) != types.end()) return p;
  }
  return Status::error(Code::kNotFound, "no pool serves task type '" + type + "'");
}

std::vector<std::pair<std::string, std::shared_ptr<Pool>>> Service::pools() const {
  MutexLock lock(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> out;
  for (const auto& [name, slot] : slots_) out.emplace_back(name, slot.pool);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Pool>>> Service::retired_pools() const {
  MutexLock lock(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> out;
  for (const auto& [name, weak] : retired_) {
    if (auto pool = weak.lock()) out.emplace_back(name, std::move(pool));
  }
  return out;
}

DeadLetterStoreStats Service::dead_letter_stats() const { return store_->stats(); }

std::vector<PoolMetrics> Service::metrics() const {
  std::vector<PoolMetrics> out;
  for (const auto& [name, pool] : pools()) out.push_back(pool->metrics());
  return out;
}

std::vector<RedisPoolFigures> Service::redis_figures() const {
  std::vector<RedisPoolFigures> out;
  if (!redis_) return out;
  for (const auto& [name, s] : redis_->feeder_stats()) {
    RedisPoolFigures& f = out.emplace_back();
    static_cast<RedisNodeCounts&>(f) = RedisPools::node_counts(s);
    f.pool = name;
    f.up = s.redis_up;
  }
  return out;
}

std::optional<std::string> Service::health() const {
  if (stopping_.load()) return "shutting down";
  if (auto problem = storage_problem()) return problem;
  if (redis_) {
    if (auto problem = redis_->problem()) return problem;
  }
  for (const auto& [name, pool] : pools()) {
    const std::string state = pool->stats_snapshot().state;
    if (state == "failed") return "pool " + name + " failed";
  }
  return std::nullopt;
}

void Service::refresh_watch_list() {
  std::vector<std::pair<std::string, std::weak_ptr<Pool>>> list;
  {
    MutexLock lock(mu_);
    for (const auto& [name, slot] : slots_) list.emplace_back("sp-loop:" + name, slot.pool);
    for (const auto& [name, weak] : retired_) {
      list.emplace_back("sp-loop:" + name + " (retiring)", weak);
    }
  }
  MutexLock lock(watch_mu_);
  watched_ = std::move(list);
}

std::vector<ThreadBusy> Service::busy_threads() const {
  std::vector<std::pair<std::string, std::weak_ptr<Pool>>> watched;
  {
    MutexLock lock(watch_mu_);  // not mu_: see the lock rule
    watched = watched_;
  }
  std::vector<ThreadBusy> out;
  for (const auto& [name, weak] : watched) {
    if (auto pool = weak.lock()) out.push_back({name, pool->busy_for_ns()});
  }
  const std::int64_t now = BusyClock::now_ns();
  for (const JobThread* t : {&requests_, &reads_, &jobs_}) {
    out.push_back({t->name(), t->busy_for_ns(now)});
  }
  return out;
}

void Service::retire(std::string name, std::shared_ptr<Pool> pool) {
  pool->drain();
  const auto timeout = config_.service.shutdown_timeout;
  std::weak_ptr<Pool> weak = pool;
  // A Redis pool's retired feeder (RedisPools::retire) writes the ends of what the pool
  // runs until it has shut down.
  std::thread t([log = log_, redis = redis_.get(), name, pool = std::move(pool), timeout] {
    const std::size_t left = pool->shutdown(timeout, DeadReason::kPoolRemoved);
    if (redis != nullptr) redis->retired(*pool);
    log->info("pool retired pool={} dead_lettered={}", name, left);
  });
  name_thread(t.native_handle(), "sp-retire:" + name);
  MutexLock lock(mu_);
  std::erase_if(retired_, [](const auto& r) { return r.second.expired(); });
  retired_.emplace_back(std::move(name), std::move(weak));
  retiring_.push_back(std::move(t));
}

}  // namespace sandpool::poold
