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

#include <sandpool/base/status.hpp>
#include <sandpool/control/rights.hpp>
#include <sandpool/pool/pool_options.hpp>
#include <sandpool/schedule/scheduler.hpp>
#include <sandpool/store/task_journal_options.hpp>

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

// `service.journal` (docs/journal.md): accepted tasks written to the state directory's
// database before they are acknowledged. `journal: on|off` is the short form of `enabled`.
struct JournalConfig {
  bool enabled = true;
  // The database's PRAGMA synchronous, for the journal and the dead letters alike: kFull
  // survives a power loss (one fsync per group commit), kNormal any crash of poold.
  StoreSync sync = StoreSync::kFull;
  // The longest a submit waits for others to share its commit; 0: commit at once.
  std::chrono::milliseconds group_commit{2};
  // A commit or sync still running after this long turns the journal failing: submits are
  // refused at once until a write succeeds again (docs/journal.md, "A failing disk").
  std::chrono::milliseconds sync_timeout{5000};
  bool operator==(const JournalConfig&) const = default;
};

// `service.redis` (docs/redis-pools.md): the Redis server the pools with `backend: redis`
// share with the other nodes of the cluster. No address: no Redis (no pool may use it).
struct RedisConfig {
  std::string address;        // "unix:/path" or "host:port"; empty: none
  std::string password_file;  // empty: no AUTH; the file (mode 0600 or stricter) holds it
  std::uint32_t db = 0;
  std::string prefix = "sandpool:";                     // every key's
  std::uint64_t dead_letters = 10000;                   // kept per pool, newest
  std::uint64_t finished = 100000;                      // finished tasks kept per pool, newest
  std::chrono::milliseconds finished_max_age{3600000};  // and for at most this long
  std::uint64_t finished_max_bytes = 64ULL << 20;       // and their results within this
  std::chrono::milliseconds heartbeat{1000};            // a node's beat; its key lives 3 beats
  bool operator==(const RedisConfig&) const = default;
};

// `service.http` (docs/configuration.md, docs/protocol.md "HTTP API"): the one HTTP listener
// (/metrics, /healthz, the dashboard, /api/v1/). The token files hold the bearer tokens of
// the read and admin rights over HTTP; empty: none (then that right is not granted).
// `service.http`: the listener and what it bounds (docs/security.md, "The HTTP listener").
struct HttpConfig {
  using Duration = std::chrono::milliseconds;
  std::string host = "127.0.0.1";
  std::uint16_t port = 9464;  // 0: pick a free port (poold logs it)
  std::string read_token_file;
  std::string admin_token_file;
  std::vector<std::string> hosts;   // more Host names to accept than the listener's address
  bool metrics_need_token = false;  // metrics_access: read
  std::uint32_t max_connections = 1024;
  std::uint32_t max_connections_per_client = 256;
  std::uint32_t backlog = 128;
  std::uint64_t max_header_bytes = 16u << 10;
  std::uint32_t max_headers = 64;
  std::uint64_t max_body = 16u << 20;
  std::uint32_t max_json_depth = 32;
  Duration idle_timeout{5000};
  Duration header_timeout{10000};
  Duration body_timeout{30000};
  Duration write_timeout{30000};
  std::uint32_t serving_threads = 16;
  std::uint32_t queued_requests = 64;
  Duration call_timeout{30000};
  Duration max_wait{60000};
  std::uint32_t max_streams = 8;
  std::uint32_t admin_reserved_streams = 2;
  Duration session_idle_timeout{1800000};
  bool operator==(const HttpConfig&) const = default;
};

struct ServiceConfig {
  using Duration = std::chrono::milliseconds;
  std::string socket_path = "/run/sandpool/poold.sock";
  std::uint32_t socket_mode = 0660;
  std::string socket_group;  // empty: poold's primary group
  std::vector<AllowRule> allow;
  std::string state_dir = "/var/lib/sandpool";
  HttpConfig http;
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
  JournalConfig journal;
  // With the journal: what a shutdown does with the tasks still open at shutdown_timeout
  // (kept for the next start, or dead-lettered `shutdown`). Without it: always dead-lettered.
  ShutdownUnfinished shutdown_unfinished = ShutdownUnfinished::kKeep;
  RedisConfig redis;
  // This node's name in the cluster (its consumer in every Redis pool's group); empty: the
  // host's name and the state directory's id (poold fills it in at start).
  std::string node;
  bool operator==(const ServiceConfig&) const = default;
};

// One entry of `pools:`. The YAML reader (config/src/config/pool_section.cpp) writes straight
// into the value parts of PoolOptions (pool_options.hpp): a pool option is declared once,
// there, and reaches the pool whole through to_pool_options(). Only what no Pool is
// configured with lives here on its own.
struct PoolConfig : PoolIdentity, WorkerSpec, LiveOptions {
  using WorkerBounds = sandpool::WorkerBounds;  // `workers.min` / `workers.max` (LiveOptions)
  // The YAML's defaults: PoolOptions' own, except that a configured pool wants every
  // namespace (sandbox.namespaces) and has no name until the file gives it one.
  PoolConfig();

  // `backend`: where the pool's tasks wait. kLocal: in this poold (and its journal); kRedis:
  // in the Redis streams every node of the cluster reads (docs/redis-pools.md).
  enum class Backend : std::uint8_t { kLocal, kRedis };
  Backend backend = Backend::kLocal;
  bool operator==(const PoolConfig&) const = default;
};

struct Config {
  ServiceConfig service;
  std::vector<PoolConfig> pools;
  std::vector<ScheduleSpec> schedules;  // docs/schedules.md
  // What the file says that still works but should change (a deprecated key), one line
  // each as `SOURCE:LINE:COLUMN: key.path: ...`; poold logs them at start.
  std::vector<std::string> warnings;
  bool operator==(const Config&) const = default;
};

// Parses a whole config file. Pure: touches no file, user database or clock. On error the
// Status (kInvalidArgument) lists the problems found (up to 20), one per line, in file order, as
// `SOURCE:LINE:COLUMN: key.path: what was expected, got "what was found"`.
Result<Config> parse_config(std::string_view yaml_text, std::string_view source_name);
// Reads `path` and parses it (errors are prefixed with `path`). kNotFound/kSystem when the
// file cannot be read.
Result<Config> load_config(const std::string& path);

// The Pool options of one configured pool: its identity, worker spec and live values as
// read (workers.initial workers; worker_bounds bound scaling). The caller sets the wiring
// (dead-letter store, logger, spawner, ...).
PoolOptions to_pool_options(const PoolConfig& pool);

std::string_view to_string(LogLevel l);
std::string_view to_string(LogFormat f);

}  // namespace sandpool
