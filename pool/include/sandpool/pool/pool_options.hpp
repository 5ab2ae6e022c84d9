// Everything a Pool is configured with, in parts by what a reconfigure does with each.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/pool/dispatch_function.hpp>
#include <sandpool/sandbox/policy.hpp>
#include <sandpool/sandbox/privileges.hpp>
#include <sandpool/task/task.hpp>

namespace spdlog {
class logger;
}

namespace sandpool {

class Spawner;
class DeadLetterStore;
struct PoolEvent;  // <sandpool/pool/pool.hpp>

// What Pool::shutdown() does with the tasks still open at its timeout when the pool journals
// (PoolWiring::dead_letter_store opened with a journal; docs/journal.md).
enum class ShutdownUnfinished : std::uint8_t {
  kKeep,        // leave them unfinished in the journal: the next Pool::create runs them
  kDeadLetter,  // dead-letter them `shutdown`, as a pool without a journal does
};

// How a pool picks a worker (docs/configuration.md, `dispatch`). kLeastRss: the lowest sampled
// RSS; kByKey: consistent hashing of the task's key over the worker slots (core/dispatcher.hpp).
enum class DispatchStrategy : std::uint8_t {
  kRoundRobin,
  kLeastLoaded,
  kRandom,
  kAffinity,
  kLeastRss,
  kByKey,
};
inline constexpr DispatchStrategy kDispatchStrategies[] = {
    DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded, DispatchStrategy::kRandom,
    DispatchStrategy::kAffinity,   DispatchStrategy::kLeastRss,    DispatchStrategy::kByKey};
// "round-robin", "least-loaded", "random", "affinity", "least-rss", "by-key".
std::string_view to_string(DispatchStrategy s);
// Takes the names to_string gives, with '_' for '-' as well ("least_rss", "by_key").
std::optional<DispatchStrategy> parse_strategy(std::string_view name);

// delay(attempt) = min(max, base * multiplier^(attempt-1)), then full jitter.
struct RetryPolicy {
  std::chrono::milliseconds base{100};
  double multiplier = 2.0;
  std::chrono::milliseconds max{30000};
  bool retry_sandbox_violation = false;
  // Returns the un-jittered delay before retry number `attempt` (1 = after the first try).
  std::chrono::milliseconds ceiling_for(std::uint32_t attempt) const;
  bool operator==(const RetryPolicy&) const = default;
};

// Fair queueing between tenants (SubmitOptions::tenant) within a priority level: each tenant
// with tasks waiting gets a share of the level's dispatches in proportion to its weight
// (docs/architecture.md, "The scheduler's order of decisions").
struct TenantPolicy {
  std::map<std::string, std::uint32_t> weights;  // by tenant name; 1 .. 1000
  std::uint32_t default_weight = 1;              // a tenant not in weights, and ""
  // Distinct named tenants that may have tasks waiting at once: a submit for one more is
  // refused queue_full. 0: no bound.
  std::size_t max_tenants = 10000;
  std::uint32_t weight_of(const std::string& tenant) const {
    auto it = weights.find(tenant);
    return it == weights.end() ? default_weight : it->second;
  }
  bool operator==(const TenantPolicy&) const = default;
};

// A token bucket: `tasks` dispatches per `per`, up to `burst` at once (0: `tasks`). A task over
// it waits (it is never refused). tasks 0: no limit.
struct RateLimit {
  std::uint32_t tasks = 0;
  std::chrono::milliseconds per{1000};
  std::uint32_t burst = 0;
  bool operator==(const RateLimit&) const = default;
};

// Flow control at dispatch (docs/architecture.md, "The scheduler's order of decisions"):
// rate limits per pool, per task type and per tenant, and per task type a cap on the
// attempts in the workers' rings at once. A task held back waits (`throttled`), then goes
// back to the front of its lane.
struct FlowLimits {
  RateLimit pool;
  std::map<std::string, RateLimit> task_types;
  std::map<std::string, RateLimit> tenants;
  std::map<std::string, std::uint32_t> type_concurrency;  // at most N dispatched at once
  bool any() const {
    return pool.tasks != 0 || !task_types.empty() || !tenants.empty() || !type_concurrency.empty();
  }
  bool operator==(const FlowLimits&) const = default;
};

// The range of a pool's worker count: Pool::scale, poold's `scale` and the autoscaler keep
// the target within it. min 0 (workers started on demand) needs task_types (a pool learns
// its types from its first worker otherwise) and an autoscaler (nothing else would start one).
struct WorkerBounds {
  std::uint32_t min = 1, max = 64;
  bool operator==(const WorkerBounds&) const = default;
};

// Autoscaling (docs/architecture.md, "The autoscaler"): while a task has waited for a worker
// longer than target_queue_wait (the oldest task queued, or waiting behind another in a
// worker's ring), the target grows by scale_up_step, at most once per cooldown and not while
// a worker is still starting; a worker idle (empty ring) for idle_timeout is retired, down
// to WorkerBounds::min, never within two cooldowns of the last step up. A pool in crash_loop
// or failed never scales up. With target 0, a task waiting starts one worker at once.
struct AutoscalePolicy {
  bool enabled = false;
  std::chrono::milliseconds target_queue_wait{100};
  std::uint32_t scale_up_step = 1;
  std::chrono::milliseconds cooldown{2000};
  std::chrono::milliseconds idle_timeout{30000};
  bool operator==(const AutoscalePolicy&) const = default;
};

// A pool's options in four parts, by what Pool::reconfigure does with a change
// (docs/architecture.md, "How a pool option flows, and how to add one"):
// - PoolIdentity: what the pool is for life; a change needs a new pool (needs_new_pool).
// - WorkerSpec: what the workers are launched with; a reconfigure takes it whole, and when
//   the launch it builds differs (command line, plugin config, region sizes) the workers are
//   rolled. What the spawner and the cgroup tree were built from at start (sandbox.namespaces,
//   sandbox.cgroup, with namespaces the user) needs a new pool instead.
// - LiveOptions: applied to the running pool in place; a reconfigure takes it whole.
// - PoolWiring: how the pool is wired into its process, read once at start: hooks and
//   start-time settings. Never compared, and a reconfigure ignores it.
// poold's YAML fills the first three (PoolConfig derives from them); the service adds the
// wiring. PoolOptions is these four and nothing else: tests/manager/pool_options_test.cpp
// fails to compile when a field is added outside them. Fields are reached directly
// (`opts.timeout`); identity(), worker_spec(), live() and wiring() name a part whole.

struct PoolIdentity {
  std::string name = "default";
  // Types this pool serves; empty: the plugin's declared types, or "default".
  std::vector<std::string> task_types;
  bool operator==(const PoolIdentity&) const = default;
};

struct WorkerSpec {
  std::string plugin_path;
  std::string plugin_config_json = "{}";
  std::uint64_t max_payload = 8u << 20;
  std::uint64_t max_result = 8u << 20;
  std::uint64_t ring_bytes = 256 * 1024;  // each of the two rings per worker
  // How often an idle worker beats (it is on the worker's command line) and the pool sweeps.
  std::chrono::milliseconds heartbeat_interval{250};
  // Plugin load and init: the worker's own alarm, and the pool's deadline for its Ready.
  std::chrono::milliseconds init_timeout{10000};
  sandbox::SandboxPolicy sandbox;
  // Who the workers become when this process runs as root (`sandbox.user`): a user name
  // or a numeric uid, resolved once when the pool starts (<sandpool/sandbox/privileges.hpp>)
  // unless sandbox.run_as is set already. Empty: workers stay uid 0, without capabilities.
  // Not root: ignored (there is nobody to drop from). As root the pool also refuses a
  // plugin that is group- or world-writable, or sits in such a directory.
  std::string user{sandbox::kDefaultSandboxUser};
  bool operator==(const WorkerSpec&) const = default;
};

struct LiveOptions {
  std::uint32_t workers = 2;  // the initial target, within worker_bounds
  WorkerBounds worker_bounds;
  AutoscalePolicy autoscale;
  std::uint32_t concurrency = 8;  // tasks that may wait in one worker's ring
  DispatchStrategy dispatch = DispatchStrategy::kRoundRobin;
  std::size_t queue_capacity = 100000;
  // Tasks one tenant may have waiting (queued or scheduled): a submit past it is refused
  // queue_full naming the tenant. 0: no bound but queue_capacity.
  std::size_t max_per_tenant = 0;
  // Priority aging: a queued task rises one level per interval waited, up to the highest
  // level holding a task. 0: no aging.
  std::chrono::milliseconds aging_interval{0};
  TenantPolicy tenants;
  FlowLimits flow;

  std::chrono::milliseconds timeout{30000};  // per attempt, from dispatch
  // The longest timeout a task may ask for (SubmitOptions::timeout); at least `timeout`.
  std::chrono::milliseconds max_timeout{std::chrono::hours(24)};
  std::uint32_t retries = 3;
  RetryPolicy retry;

  // Health. An idle worker silent for missed_heartbeats heartbeat_intervals (stopped,
  // deadlocked) is killed and replaced; a running task is bounded by its timeout and cpu_time.
  std::uint32_t missed_heartbeats = 3;
  std::chrono::milliseconds cpu_time{0};  // CPU per task attempt (resource_limit: cpu); 0: none
  // Hung-task diagnostics: before killing a worker for a timeout, cpu_time or missed
  // heartbeats, ask it for a backtrace and wait at most this long for the answer (the
  // event loop keeps running meanwhile). 0: kill at once, no backtrace.
  std::chrono::milliseconds backtrace_grace{100};

  // Restart intensity (OTP style): more than max_restarts unexpected worker exits within
  // restart_window put the pool in crash_loop, where replacements back off exponentially
  // (crash_backoff_base doubling up to crash_backoff_max) until a worker stays up for
  // stable_after.
  std::uint32_t max_restarts = 10;
  std::chrono::milliseconds restart_window{60000};
  std::chrono::milliseconds crash_backoff_base{100};
  std::chrono::milliseconds crash_backoff_max{10000};
  std::chrono::milliseconds stable_after{5000};

  // Recycling: a worker is drained and replaced after this many tasks / above this RSS /
  // once it has been up this long.
  std::uint64_t recycle_max_tasks = 0;           // 0: never
  std::uint64_t recycle_max_rss = 0;             // bytes; 0: never
  std::chrono::milliseconds recycle_max_age{0};  // since it became ready; 0: never

  // A task still queued (never dispatched) this long after submit is dead-lettered `expired`.
  std::optional<std::chrono::milliseconds> queue_ttl;

  std::chrono::milliseconds cancel_grace{1000};
  // A worker asked to stop (close, scale down, recycling, a restart) that has not exited this
  // long after Stop, its plugin's shutdown hook included, is killed.
  std::chrono::milliseconds stop_timeout{5000};
  std::uint32_t max_init_failures = 3;       // consecutive; then the pool is `failed`
  std::size_t dead_letter_capacity = 10000;  // in-memory dead letters kept
  // Records of ended tasks kept for lookup by id (Pool::find), oldest evicted first.
  std::size_t task_records_max = 10000;                                   // 0: none kept
  std::chrono::milliseconds task_records_max_age{std::chrono::hours(1)};  // 0: no age bound
  std::uint64_t task_records_max_bytes = 64u << 20;  // payload + result bytes; 0: no bound
  bool operator==(const LiveOptions&) const = default;
};

struct PoolWiring {
  // The worker host executable; empty: sandpool-worker next to this program, then
  // $SANDPOOL_WORKER, then the installed libexec path. Located once, at start.
  std::string worker_path;
  // What one worker may put into the manager's log: its stdout/stderr lines and its
  // plugin's log lines together, as a token bucket (lines per second, burst). Lines over it
  // are dropped, counted in PoolStats::output_dropped and reported in one line.
  double output_lines_per_second = 200;
  double output_burst = 400;
  // Where task ids come from. Share one counter between pools (the service does) so ids
  // are unique across them; null: this pool's own counter, from 1.
  std::shared_ptr<std::atomic<std::uint64_t>> task_ids;
  // Durable dead letters (<sandpool/store/dead_letters.hpp>); null: memory only. Shared so that
  // several pools (and a controller) can use one store. When the store was opened with a
  // journal (DeadLetterStoreOptions::journal), the pool journals its tasks there
  // (docs/journal.md): a submit is acknowledged (SubmitOptions::on_accepted,
  // Ticket::wait_accepted) once committed, a terminal state is reported once written, new ids
  // start above the journal's highest, and Pool::create queues this pool's unfinished tasks
  // again.
  std::shared_ptr<DeadLetterStore> dead_letter_store;
  // With a journal: what shutdown(timeout, kShutdown) does with what is still open at its
  // timeout. Without one, they are always dead-lettered.
  ShutdownUnfinished shutdown_unfinished = ShutdownUnfinished::kKeep;
  // With a journal: whether Pool::create queues this pool's unfinished tasks again. False for
  // a pool that replaces a running one of the same name (a reload), whose tasks are still
  // the running pool's.
  bool recover_unfinished = true;
  // With a journal: the on_done of each task Pool::create recovers (a recovered task has no
  // callbacks of its own), given its id and idempotency key; null: none. Called on the
  // creating thread; the function it returns runs on the loop thread like SubmitOptions'.
  std::function<std::function<void(const TaskResult&)>(std::uint64_t id,
                                                       const std::string& idempotency_key)>
      recovered_on_done;
  std::shared_ptr<spdlog::logger> logger;  // null: spdlog's default logger
  // Lifecycle events (workers started, ready, exited; attempts and tasks ended), called on
  // the pool's loop thread: keep it short and non-blocking. Null: none.
  std::function<void(const PoolEvent&)> on_event;
  // The embedding program's own choice of worker (<sandpool/pool/dispatch_function.hpp>); null: the
  // built-in `dispatch` strategy, which is also the fallback when the function throws or
  // names a worker that cannot take the task. poold never sets one (no dispatch code is
  // loaded from a plugin into the manager).
  DispatchFunction dispatch_function;
  // A dispatch_function call that takes longer than this is counted slow and logged (at most
  // one line per 10 s); it cannot be stopped, only measured (docs/architecture.md).
  std::chrono::microseconds dispatch_function_slow{1000};
  std::shared_ptr<Spawner> spawner;  // the OS seam; null: the Boost.Process spawner
  std::uint64_t seed = 0;            // jitter/random dispatch seed; 0: random
  // How long the pool's loop and each of its workers spin on their rings before they sleep,
  // in microseconds, taken at start (docs/performance.md). Unset: 50 with 2 or more cores
  // and fewer than 4 workers per core, else 0; 0: never spin.
  std::optional<std::uint32_t> spin_us;
};

// Everything a Pool is configured with: the four parts above as bases, so each field is
// reached by its own name (`opts.timeout`) and each part is taken or compared whole.
struct PoolOptions : PoolIdentity, WorkerSpec, LiveOptions, PoolWiring {
  PoolIdentity& identity() { return *this; }
  const PoolIdentity& identity() const { return *this; }
  WorkerSpec& worker_spec() { return *this; }
  const WorkerSpec& worker_spec() const { return *this; }
  LiveOptions& live() { return *this; }
  const LiveOptions& live() const { return *this; }
  PoolWiring& wiring() { return *this; }
  const PoolWiring& wiring() const { return *this; }
};

// RLIMIT_CPU, the lifetime backstop of every worker of a pool (docs/security.md, lock-down step 3):
// the kernel sends SIGXCPU when a worker's CPU time, all its tasks and threads together, reaches it
// (resource_limit: cpu), SIGKILL a second later. The pool recycles a worker before then.
inline constexpr std::uint64_t kWorkerCpuFactor = 10;        // attempts' worth of CPU
inline constexpr std::uint64_t kWorkerCpuFloorSeconds = 60;  // never less than this
// Returns the RLIMIT_CPU (seconds) each worker of a pool with `opts` gets:
// opts.sandbox.limits.cpu_seconds when it is set (non-zero), else
// max(kWorkerCpuFloorSeconds, kWorkerCpuFactor * ceil(max(timeout, cpu_time) in seconds)),
// 300 s with the defaults (timeout 30 s, no cpu_time). The one place that number comes from.
std::uint64_t worker_cpu_seconds(const PoolOptions& opts);

}  // namespace sandpool
