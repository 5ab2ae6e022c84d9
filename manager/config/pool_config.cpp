#include <sandpool/config.hpp>

namespace sandpool {

PoolOptions to_pool_options(const PoolConfig& pool) {
  PoolOptions o;
  o.name = pool.name;
  o.plugin_path = pool.plugin;
  o.plugin_config_json = pool.plugin_config_json;
  o.task_types = pool.task_types;

  o.workers = pool.workers.initial;
  o.concurrency = pool.concurrency;
  o.dispatch = pool.dispatch;
  o.queue_capacity = pool.queue.capacity;
  o.queue_ttl = pool.queue.ttl;

  o.timeout = pool.task_defaults.timeout;
  o.max_timeout = pool.task_defaults.max_timeout;
  o.retries = pool.task_defaults.retries;
  o.cancel_grace = pool.task_defaults.cancel_grace;
  o.retry.base = pool.retry.base;
  o.retry.multiplier = pool.retry.multiplier;
  o.retry.max = pool.retry.max;
  o.retry.retry_sandbox_violation = pool.retry.retry_sandbox_violation;

  o.max_payload = pool.limits.max_payload;
  o.max_result = pool.limits.max_result;
  o.cpu_time = pool.limits.cpu_time;
  o.sandbox.profile = pool.sandbox.profile;
  o.sandbox.allow_syscalls = pool.sandbox.allow_syscalls;
  o.sandbox.keep_env = pool.sandbox.keep_env;
  o.sandbox.cgroup = pool.sandbox.cgroup;
  o.sandbox.cpu_quota = pool.limits.cpu_quota;
  o.sandbox.readonly_paths = pool.sandbox.readonly_paths;
  o.sandbox.require = pool.sandbox.require;
  o.user = pool.sandbox.user;
  o.sandbox.namespaces.wanted = pool.sandbox.namespaces;
  o.sandbox.namespaces.required = pool.sandbox.require_namespaces;
  o.sandbox.namespaces.readonly_paths = pool.sandbox.readonly_paths;
  o.sandbox.namespaces.tmpfs_size = pool.sandbox.tmpfs_size;
  o.sandbox.limits.address_space = pool.limits.memory;
  o.sandbox.limits.open_files = pool.limits.open_files;
  o.sandbox.limits.processes = pool.limits.processes;
  o.sandbox.limits.file_size = pool.limits.file_size;

  o.heartbeat_interval = pool.health.heartbeat_interval;
  o.missed_heartbeats = pool.health.missed_heartbeats;
  o.init_timeout = pool.health.init_timeout;
  o.stop_timeout = pool.health.stop_timeout;

  o.max_restarts = pool.restart.max_restarts;
  o.restart_window = pool.restart.within;
  o.crash_backoff_base = pool.restart.backoff_base;
  o.crash_backoff_max = pool.restart.backoff_max;
  o.stable_after = pool.restart.stable_after;
  o.max_init_failures = pool.restart.max_init_failures;

  o.recycle_max_tasks = pool.recycle.max_tasks;
  o.recycle_max_rss = pool.recycle.max_rss;
  return o;
}

std::string_view to_string(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "info";
}

std::string_view to_string(LogFormat f) { return f == LogFormat::kJson ? "json" : "text"; }

}  // namespace sandpool
