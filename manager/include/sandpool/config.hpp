// poold's configuration: the typed form of its YAML file (docs/configuration.md documents
// every key) and the pure parser that builds it. Plain values, safe to copy across threads;
// the functions are reentrant. Every field has its default.
// Paths are kept as written; poold resolves relative ones against its working directory.
// Equality compares every field (a reload applies only what changed).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/pool_options.hpp>
#include <sandpool/rights.hpp>
#include <sandpool/status.hpp>

namespace sandpool {

enum class LogLevel : std::uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
enum class LogFormat : std::uint8_t { kText, kJson };

// One `allow` entry: a user or group, by name or by numeric id (poold resolves names).
struct AllowRule {
  bool is_group = false;
  std::string name;                 // empty when given by id
  std::optional<std::uint32_t> id;  // set when given by number
  Rights rights = Rights::kRead;
  bool operator==(const AllowRule&) const = default;
};

struct ServiceConfig {
  using Duration = std::chrono::milliseconds;
  std::string socket_path = "/run/sandpool/poold.sock";
  std::uint32_t socket_mode = 0660;
  std::string socket_group;  // empty: poold's primary group
  std::vector<AllowRule> allow;
  std::string state_dir = "/var/lib/sandpool";
  std::string metrics_host = "127.0.0.1";
  std::uint16_t metrics_port = 9464;  // 0: pick a free port (poold logs it)
  LogLevel log_level = LogLevel::kInfo;
  LogFormat log_format = LogFormat::kText;
  Duration shutdown_timeout{30000};
  std::uint32_t max_connections = 64;
  std::uint32_t max_outstanding_requests = 4096;  // per connection
  std::uint64_t max_buffered_bytes = 16u << 20;   // per connection, replies to a slow reader
  // service.control: what one peer may hold of the control plane (docs/protocol.md).
  // Of max_connections, for admins only; the parser's default is max_connections / 8.
  std::uint32_t admin_reserved_connections = 8;
  std::uint32_t connections_per_uid = 16;    // peers without admin rights
  std::uint32_t streams_per_connection = 4;  // open `events` requests
  std::uint32_t streams_per_uid = 16;
  Duration idle_timeout{60000};             // after hello, with no request open; 0: none
  std::uint64_t task_records_max = 100000;  // finished tasks kept for `poolctl task`
  Duration task_records_max_age{3600000};
  // `journal: on` is planned; the parser accepts only `off`.
  bool operator==(const ServiceConfig&) const = default;
};

struct PoolConfig {
  using Duration = std::chrono::milliseconds;
  struct Workers {
    std::uint32_t min = 1, max = 64, initial = 2;
    bool operator==(const Workers&) const = default;
  };
  struct Queue {
    std::uint64_t capacity = 100000;
    std::optional<Duration> ttl;
    bool operator==(const Queue&) const = default;
  };
  struct Limits {
    // bytes: the cgroup's memory limit when the worker has one, else address space
    // (RLIMIT_AS); 0 here and below: no limit
    std::uint64_t memory = sandbox::ResourceLimits{}.address_space;
    Duration cpu_time{0};  // CPU per task attempt
    double cpu_quota = 0;  // CPUs a worker may use at once (needs sandbox.cgroup)
    std::uint64_t open_files = sandbox::ResourceLimits{}.open_files;
    std::uint64_t processes = sandbox::ResourceLimits{}.processes;
    std::uint64_t file_size = sandbox::ResourceLimits{}.file_size;
    std::uint64_t max_payload = 8u << 20, max_result = 8u << 20;
    bool operator==(const Limits&) const = default;
  };
  struct Sandbox {
    sandbox::SeccompProfile profile = sandbox::SeccompProfile::kStrict;
    std::vector<std::string> allow_syscalls, keep_env;
    sandbox::CgroupMode cgroup = sandbox::CgroupMode::kOff;
    std::string user{sandbox::kDefaultSandboxUser};  // as root: who the workers become
    // Namespaces (docs/security.md, "Namespaces"): all of them unless the file says
    // otherwise; those the kernel refuses are left out with a warning unless required.
    sandbox::NamespaceSet namespaces = sandbox::NamespaceSet::all();
    std::vector<std::string> require;          // layers whose absence is fatal, by name
    sandbox::NamespaceSet require_namespaces;  // the namespaces among them
    std::vector<std::string> readonly_paths;   // in the mount view, and readable under Landlock
    std::uint64_t tmpfs_size = 0;              // bytes; 0: no /tmp in the mount namespace's view
    bool operator==(const Sandbox&) const = default;
  };
  struct Health {
    Duration heartbeat_interval{250};
    std::uint32_t missed_heartbeats = 3;
    Duration init_timeout{10000};
    Duration stop_timeout{5000};
    bool operator==(const Health&) const = default;
  };
  struct TaskDefaults {
    Duration timeout{30000};
    Duration max_timeout{86400000};  // the longest timeout a submit may ask for
    std::uint32_t retries = 3;
    Duration cancel_grace{1000};
    bool operator==(const TaskDefaults&) const = default;
  };
  struct Retry {  // delay before retry n: min(max, base * multiplier^(n-1)), full jitter
    Duration base{100};
    double multiplier = 2.0;
    Duration max{30000};
    bool retry_sandbox_violation = false;
    bool operator==(const Retry&) const = default;
  };
  struct Restart {
    std::uint32_t max_restarts = 10;
    Duration within{60000}, backoff_base{100}, backoff_max{10000}, stable_after{5000};
    std::uint32_t max_init_failures = 3;
    bool operator==(const Restart&) const = default;
  };
  struct Recycle {
    std::uint64_t max_tasks = 0, max_rss = 0;  // 0: never
    bool operator==(const Recycle&) const = default;
  };

  std::string name;    // required, [a-z0-9_-]+, unique
  std::string plugin;  // required, the plugin .so
  std::string plugin_config_json = "{}";
  std::vector<std::string> task_types;  // empty: the plugin's declared types
  Workers workers;
  std::uint32_t concurrency = 8;
  Queue queue;
  DispatchStrategy dispatch = DispatchStrategy::kRoundRobin;
  Limits limits;
  Sandbox sandbox;
  Health health;
  TaskDefaults task_defaults;
  Retry retry;
  Restart restart;
  Recycle recycle;
  bool operator==(const PoolConfig&) const = default;
};

struct Config {
  ServiceConfig service;
  std::vector<PoolConfig> pools;
  bool operator==(const Config&) const = default;
};

// Parses a whole config file. Pure: touches no file, user database or clock. On error the
// Status (kInvalidArgument) lists the problems found (up to 20), one per line, in file order, as
// `SOURCE:LINE:COLUMN: key.path: what was expected, got "what was found"`.
Result<Config> parse_config(std::string_view yaml_text, std::string_view source_name);
// Reads `path` and parses it (errors are prefixed with `path`). kNotFound/kSystem when the
// file cannot be read.
Result<Config> load_config(const std::string& path);

// The Pool options of one configured pool (workers.initial workers; min/max bound scaling).
// The caller sets the dead-letter store, logger and spawner.
PoolOptions to_pool_options(const PoolConfig& pool);

std::string_view to_string(LogLevel l);
std::string_view to_string(LogFormat f);

}  // namespace sandpool
