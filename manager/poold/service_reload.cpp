// Service: reload (re-read the config and apply the differences) and shutdown.
#include <spdlog/logger.h>

#include <utility>

#include "poold/service.hpp"

namespace sandpool::poold {
namespace {

using nlohmann::json;

// True iff only workers and dispatch differ (those apply to the running pool).
bool same_but_workers_and_dispatch(PoolConfig a, const PoolConfig& b) {
  a.workers = b.workers;
  a.dispatch = b.dispatch;
  return a == b;
}

}  // namespace

Result<json> Service::reload() {
  std::lock_guard<std::mutex> reload_lock(reload_mu_);
  if (stopping_.load()) return Status::error(Code::kClosed, "poold is shutting down");
  auto loaded = load_config(config_path_);
  if (!loaded) {
    log_->error("reload refused, the running config stays: {}", loaded.status().message());
    return loaded.status();
  }
  Config next = std::move(loaded).value();
  make_paths_absolute(next);
  json added = json::array(), removed = json::array(), scaled = json::array(),
       restrategied = json::array(), replaced = json::array(), failed = json::array();

  std::map<std::string, const PoolConfig*> wanted;
  for (const PoolConfig& pc : next.pools) wanted[pc.name] = &pc;

  // Removed pools: out of routing at once, drained and shut down in the background.
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    removed.push_back(name);
    retire(name, std::move(pool));
  }

  for (const PoolConfig& pc : next.pools) {
    std::optional<Slot> current;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = slots_.find(pc.name); it != slots_.end()) current = it->second;
    }
    if (current && current->config == pc) continue;
    if (!current || !same_but_workers_and_dispatch(current->config, pc)) {
      // New, or changed beyond workers/dispatch: a new pool takes over routing; the old one
      // drains what it accepted.
      auto pool = make_pool(pc);
      if (!pool) {
        log_->error("reload: pool {} could not start: {}", pc.name, pool.status().message());
        failed.push_back({{"pool", pc.name}, {"error", pool.status().message()}});
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        slots_[pc.name] = Slot{pc, *pool};
      }
      (current ? replaced : added).push_back(pc.name);
      if (current) retire(pc.name, current->pool);
      continue;
    }
    const PoolConfig& old = current->config;
    if (!(old.workers == pc.workers)) {
      const std::uint32_t target =
          old.workers.initial != pc.workers.initial
              ? pc.workers.initial
              : std::clamp(current->pool->stats().target_workers, pc.workers.min, pc.workers.max);
      if (Status s = current->pool->scale(target); !s) {
        failed.push_back({{"pool", pc.name}, {"error", s.message()}});
      } else {
        scaled.push_back({{"pool", pc.name}, {"workers", target}});
      }
    }
    if (old.dispatch != pc.dispatch) {
      if (Status s = current->pool->set_strategy(pc.dispatch); !s) {
        failed.push_back({{"pool", pc.name}, {"error", s.message()}});
      } else {
        restrategied.push_back(pc.name);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    slots_[pc.name].config = pc;
  }

  // The service section (socket, access, metrics, state dir, logging) needs a restart.
  const bool service_changed = !(config_.service == next.service);
  config_.pools = next.pools;
  json out{{"added", added},
           {"removed", removed},
           {"replaced", replaced},
           {"scaled", scaled},
           {"strategy_changed", restrategied},
           {"failed", failed},
           {"service_section_needs_restart", service_changed}};
  log_->info("reload applied: {}", out.dump());
  return out;
}

void Service::shutdown(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> reload_lock(reload_mu_);
  if (stopping_.exchange(true)) return;
  log_->info("shutting down timeout_ms={}", timeout.count());
  std::vector<std::thread> threads;
  for (auto& [name, pool] : pools()) {
    threads.emplace_back([this, name = name, pool = pool, timeout] {
      const std::size_t left = pool->shutdown(timeout);
      log_->info("pool stopped pool={} dead_lettered={}", name, left);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::thread> retiring;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retiring.swap(retiring_);
  }
  for (auto& t : retiring) t.join();
  if (Status s = store_->flush(std::chrono::seconds(10)); !s) {
    log_->error("dead-letter store flush: {}", s.message());
  }
  if (Status s = store_->close(); !s) log_->error("dead-letter store close: {}", s.message());
}

}  // namespace sandpool::poold
