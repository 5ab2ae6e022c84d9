// Service: reload (re-read the config and apply the differences) and shutdown.
#include <spdlog/logger.h>

#include <algorithm>
#include <future>
#include <utility>

#include <sandpool/service/service.hpp>

#include <sandpool/base/thread_name.hpp>

namespace sandpool::poold {
namespace {

// The worker count a reload gives a running pool: the new `initial` when it changed,
// otherwise the pool's current target (it may have been scaled) clamped into min..max.
std::uint32_t reload_target(const PoolConfig& old, const PoolConfig& next, std::uint32_t current) {
  if (old.workers != next.workers) return next.workers;
  return std::clamp(current, next.worker_bounds.min, next.worker_bounds.max);
}

// Returns true iff the reload changed the pool's `workers` keys (initial, min or max).
bool workers_changed(const PoolConfig& old, const PoolConfig& next) {
  return old.workers != next.workers || !(old.worker_bounds == next.worker_bounds);
}

}  // namespace

void Service::reload_async(std::function<void(const Result<ops::ReloadReply>&)> done) {
  jobs_.post([this, done = std::move(done)] {
    const Result<ops::ReloadReply> r = reload();
    if (done) done(r);
  });
}

Result<ops::ReloadReply> Service::reload() {
  if (stopping_.load()) return Status::error(Code::kClosed, "poold is shutting down");
  auto loaded = load_config(config_path_);
  if (!loaded) {
    log_->error("reload refused, the running config stays: {}", loaded.status().message());
    return loaded.status();
  }
  Config next = std::move(loaded).value();
  make_paths_absolute(next);
  ops::ReloadReply out;
  remove_pools_not_in(next, out);
  for (const PoolConfig& pc : next.pools) reload_pool(pc, out);
  refresh_watch_list();
  if (Status st = apply_schedules(next.schedules); !st) {
    out.failed.push_back({"schedules", st.message()});
  }
  config_.schedules = next.schedules;
  // The service section (socket, access, metrics, state dir, logging) needs a restart.
  out.service_section_needs_restart = !(config_.service == next.service);
  config_.pools = next.pools;
  log_->info("reload applied: {}",
             ops::encode(out).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return out;
}

void Service::remove_pools_not_in(const Config& next, ops::ReloadReply& out) {
  std::map<std::string, const PoolConfig*> wanted;
  for (const PoolConfig& pc : next.pools) wanted[pc.name] = &pc;

  // Removed pools: out of routing at once, drained and shut down in the background.
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> gone;
  {
    MutexLock lock(mu_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      if (wanted.count(it->first) != 0) {
        ++it;
        continue;
      }
      gone.emplace_back(it->first, it->second.pool);
      it = slots_.erase(it);
    }
  }
  for (auto& [name, pool] : gone) {
    out.removed.push_back(name);
    if (redis_) redis_->retire(name);  // its feeder lives on while the pool drains
    retire(name, std::move(pool));
  }
}

void Service::reload_pool(const PoolConfig& pc, ops::ReloadReply& out) {
  std::optional<Slot> current;
  {
    MutexLock lock(mu_);
    if (auto it = slots_.find(pc.name); it != slots_.end()) current = it->second;
  }
  if (current && current->config == pc) return;
  if (current && current->config.backend != pc.backend) {
    out.failed.push_back({pc.name, "backend: a pool's backend changes at a restart of poold"});
    return;
  }
  // What a pool keeps for life (needs_new_pool: its task types, what its spawner and
  // cgroups were built from), and a failed pool, which stays failed: those get a new pool,
  // which takes over routing while the old one drains what it accepted.
  if (!current || needs_new_pool(pool_options(current->config), pool_options(pc)) ||
      current->pool->stats().state == "failed") {
    replace_pool(pc, current, out);
  } else {
    reconfigure_pool(pc, *current, out);
  }
}

void Service::replace_pool(const PoolConfig& pc, const std::optional<Slot>& current,
                           ops::ReloadReply& out) {
  auto pool = make_pool(pc, false);
  // A Redis pool's new feeder takes over from the old one, which lives on, reading
  // nothing, while the old pool drains (RedisPools::attach); when it cannot start, the old
  // pool keeps its slot and its feeder as they were.
  if (pool) {
    if (Status st = attach_redis(pc, **pool); !st) pool = st;
  }
  if (!pool) {
    log_->error("reload: pool {} could not start: {}", pc.name, pool.status().message());
    out.failed.push_back({pc.name, pool.status().message()});
    return;
  }
  {
    MutexLock lock(mu_);
    slots_[pc.name] = Slot{pc, *pool};
  }
  (current ? out.replaced : out.added).push_back(pc.name);
  if (current) retire(pc.name, current->pool);
}

void Service::reconfigure_pool(const PoolConfig& pc, const Slot& current, ops::ReloadReply& out) {
  // Everything else applies to the running pool: its queued tasks, ids, records and
  // metrics stay; a new launch spec (plugin, limits, sandbox, ...) rolls its workers.
  const PoolConfig& old = current.config;
  const std::uint32_t target = reload_target(old, pc, current.pool->stats().target_workers);
  PoolOptions options = pool_options(pc);
  options.workers = target;
  auto applied = current.pool->reconfigure(std::move(options));
  if (!applied) {
    log_->error("reload: pool {} not reconfigured: {}", pc.name, applied.status().message());
    out.failed.push_back({pc.name, applied.status().message()});
    return;
  }
  out.reconfigured.push_back({pc.name, applied->rolling_restart});
  if (redis_ && pc.backend == PoolConfig::Backend::kRedis) {
    redis_->reconfigured(pc);  // what its feeder reads follows the new pool
    redis_->set_limits(pc);
  }
  if (workers_changed(old, pc)) out.scaled.push_back({pc.name, target});
  if (old.dispatch != pc.dispatch) out.strategy_changed.push_back(pc.name);
  MutexLock lock(mu_);
  slots_[pc.name].config = pc;
}

void Service::shutdown(std::chrono::milliseconds timeout) {
  if (stopping_.exchange(true)) return;  // from now on submits and reloads are refused
  stop_schedules();
  log_->info("shutting down timeout_ms={}", timeout.count());
  // On the job thread, after a reload that may be running there: no lock serialises them.
  std::promise<void> done;
  jobs_.post([this, timeout, &done] {
    shut_down_pools(timeout);
    done.set_value();
  });
  done.get_future().wait();
}

void Service::shut_down_pools(std::chrono::milliseconds timeout) {
  // The Redis pools read nothing more; what they run ends here and is written, and what the
  // shutdown stops goes back to the stream for another node (redis_feeder.hpp).
  if (redis_) redis_->stop_reading();
  std::vector<std::thread> threads;
  for (auto& [name, pool] : pools()) {
    threads.emplace_back([this, name = name, pool = pool, timeout] {
      const std::size_t left = pool->shutdown(timeout);
      // With the journal and shutdown_unfinished keep, what is left stays for the next start.
      const bool kept =
          journal() != nullptr && config_.service.shutdown_unfinished == ShutdownUnfinished::kKeep;
      log_->info("pool stopped pool={} {}={}", name, kept ? "kept_unfinished" : "dead_lettered",
                 left);
    });
    name_thread(threads.back().native_handle(), "sp-stop:" + name);
  }
  for (auto& t : threads) t.join();
  std::vector<std::thread> retiring;
  {
    MutexLock lock(mu_);
    retiring.swap(retiring_);
  }
  for (auto& t : retiring) t.join();  // first: their feeders write what the pools ended
  if (redis_) redis_->detach_all();
  if (Status s = store_->flush(std::chrono::seconds(10)); !s) {
    log_->error("dead-letter store flush: {}", s.message());
  }
  if (Status s = store_->close(); !s) log_->error("dead-letter store close: {}", s.message());
}

}  // namespace sandpool::poold
