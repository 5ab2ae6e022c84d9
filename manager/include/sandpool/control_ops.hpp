// The control protocol's operations (docs/protocol.md, "Operations"), one definition each:
// its name, the rights it needs, the poold thread that runs it, and its typed arguments and
// reply. The JSON mapping of these types is the control library's own
// (manager/control/op_json.hpp): the server's handlers, the Client and poolctl read and
// write the wire through it, so the three cannot drift. This header has no JSON type.
//
// Adding an operation: a row in kOps (below), its Args/Reply types and an `Op` struct here,
// their mapping in op_json.cpp, its handler in poold (service_dispatch.cpp names it), a
// poolctl command, and a row in docs/protocol.md's table (a test compares the two).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/rights.hpp>

namespace sandpool::ops {

// Where poold runs an operation (docs/protocol.md, "Threading contract of the server").
enum class Lane : std::uint8_t {
  kServer,    // on the control server's thread: answers at once, never blocks
  kReads,     // sp-reads: snapshots, never queued behind submits or jobs
  kRequests,  // sp-request: one at a time in arrival order
  kJobs,      // sp-jobs: slow work (the store, reload)
};

struct OpInfo {
  std::string_view name;
  Rights rights;
  Lane lane;
  bool stream;  // counts against the stream caps while open (ControlServerOptions)
};

// Every operation the protocol has; the server answers any other name `unknown_op`.
inline constexpr std::array<OpInfo, 22> kOps{{
    {"status", Rights::kRead, Lane::kServer, false},
    {"workers", Rights::kRead, Lane::kReads, false},
    {"stats", Rights::kRead, Lane::kReads, false},
    {"events", Rights::kRead, Lane::kServer, true},
    {"task", Rights::kRead, Lane::kReads, false},
    {"wait", Rights::kRead, Lane::kReads, false},
    {"submit", Rights::kAdmin, Lane::kRequests, false},
    {"submit_batch", Rights::kAdmin, Lane::kRequests, false},
    {"cancel", Rights::kAdmin, Lane::kRequests, false},
    {"scale", Rights::kAdmin, Lane::kRequests, false},
    {"strategy", Rights::kAdmin, Lane::kRequests, false},
    {"drain", Rights::kAdmin, Lane::kRequests, false},
    {"resume", Rights::kAdmin, Lane::kRequests, false},
    {"restart", Rights::kAdmin, Lane::kRequests, false},
    {"kill_worker", Rights::kAdmin, Lane::kRequests, false},
    {"dlq_list", Rights::kAdmin, Lane::kReads, false},
    {"dlq_show", Rights::kAdmin, Lane::kReads, false},
    {"dlq_replay", Rights::kAdmin, Lane::kJobs, false},
    {"dlq_purge", Rights::kAdmin, Lane::kJobs, false},
    {"dlq_import", Rights::kAdmin, Lane::kJobs, false},
    {"reload", Rights::kAdmin, Lane::kJobs, false},
    {"shutdown", Rights::kAdmin, Lane::kServer, false},
}};

// The row of `name`, or nullptr when the protocol has no such operation.
constexpr const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// --- Arguments and replies ------------------------------------------------------------------

// `task`, `cancel`: the task's id.
struct TaskIdArgs {
  std::uint64_t id = 0;
};

// `wait`: the task's id, and how long the wait may take (none: until the task ends).
struct WaitArgs {
  std::uint64_t id = 0;
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
};

// One attempt of a task (architecture.md, "Task states, outcomes and reasons").
struct AttemptAccount {
  std::uint32_t number = 0;
  std::string outcome;
  std::string error;
  std::int32_t worker_pid = 0;
  std::int64_t started_ms = 0;
  std::int64_t ended_ms = 0;
  std::string backtrace;  // "" when none (then absent on the wire)
};

// A task's account (the reply of `task`, `wait` and a waited `submit`); the result bytes
// travel in the reply's blob.
struct TaskAccount {
  std::uint64_t id = 0;
  std::string type;
  std::string state;
  std::optional<std::string> reason;  // dead-letter or cancel reason, for those states
  std::string error;
  std::uint32_t attempts = 0;
  std::vector<AttemptAccount> history;
  bool dead_letter_pending = false;  // decided dead-lettered, the letter not yet written
  bool result_withheld = false;      // a result exists; the peer lacks the rights to read it
  bool result_dropped = false;       // an idempotency key's kept result had to go
};

struct CancelReply {
  std::uint64_t id = 0;
  bool cancelled = false;  // false: the task was already terminal
  std::string state;
};

// `drain`, `resume`: the pool.
struct PoolArgs {
  std::string pool;
};

struct ScaleArgs {
  std::string pool;
  std::uint32_t workers = 0;
};

struct StrategyArgs {
  std::string pool;
  std::string strategy;  // round-robin, least-loaded, random, affinity
};

struct RestartArgs {
  std::string pool;
  bool rolling = false;
};

struct KillWorkerArgs {
  std::string pool;
  std::int32_t pid = 0;
  int signal = 9;
};

// The reply of every pool control (scale, strategy, drain, resume, restart, kill_worker).
struct PoolStateReply {
  std::string pool;
  std::string state;
};

// --- Reads: status, workers, stats ------------------------------------------------------------

// `workers`, `stats`: one pool, or every pool when empty (then absent on the wire).
struct PoolFilterArgs {
  std::string pool;
};

// `status`: one pool's line.
struct PoolStatus {
  std::string name;
  std::string state;
  std::string dispatch;
  std::vector<std::string> task_types;
  std::uint32_t workers = 0;
  std::uint32_t target_workers = 0;
  std::uint64_t queued = 0;
  std::uint64_t in_flight = 0;
};

// `status`: the dead-letter store's figures (DeadLetterStoreStats, a subset).
struct DeadLetterStoreStatus {
  std::uint64_t written = 0;
  std::uint64_t pending = 0;
  std::int64_t oldest_pending_ms = 0;
  bool writes_failing = false;
  std::string last_write_error;
  std::uint64_t write_errors = 0;
  std::uint64_t spilled = 0;
  std::uint64_t spill_files = 0;
  std::vector<std::string> recent_spill_files;
  std::uint64_t lost = 0;
};

struct StatusReply {
  std::int32_t pid = 0;
  std::int64_t started_ms = 0;
  bool stopping = false;
  std::vector<PoolStatus> pools;
  DeadLetterStoreStatus dead_letter_store;
  std::uint64_t events_dropped = 0;
  std::uint64_t idempotency_keys = 0;
  std::uint64_t idempotency_kept_bytes = 0;
};

// `workers`: one worker (WorkerInfo with the figures poold reads from /proc).
struct WorkerStatus {
  std::string pool;
  std::uint32_t slot = 0;
  std::int32_t pid = 0;
  std::string state;
  std::uint32_t in_flight = 0;
  std::uint64_t tasks_done = 0;
  std::int64_t uptime_ms = 0;
  std::uint64_t rss_bytes = 0;
  std::int64_t cpu_ms = 0;
  std::optional<std::int64_t> last_beat_ms;  // wall clock; null before the first heartbeat
  std::uint64_t restarts = 0;
  std::string isolation;
};

struct WorkersReply {
  std::vector<WorkerStatus> workers;
};

// Latency quantiles in ms; null when no task was measured.
struct Quantiles {
  std::optional<double> p50;
  std::optional<double> p90;  // absent from queue_wait_ms
  std::optional<double> p99;
};

// `stats`: one pool's counters (PoolStats) and latencies.
struct PoolCounters {
  std::string name;
  std::string state;
  std::uint64_t submitted = 0, completed = 0, dead_lettered = 0, cancelled = 0;
  std::uint64_t retried = 0, lost = 0, restarts = 0, recycled = 0, expired = 0;
  std::uint64_t heartbeat_kills = 0, output_dropped = 0, letters_pending = 0;
  bool crash_loop = false;
  std::uint64_t queued = 0, in_flight = 0, retry_wait = 0;
  std::uint32_t workers = 0, target_workers = 0;
  Quantiles latency_ms;     // p50, p90, p99
  Quantiles queue_wait_ms;  // p50, p99
};

struct StatsReply {
  std::vector<PoolCounters> pools;
};

// No arguments.
struct NoArgs {};

// `events`: the stream's filter; follow=false: the recent events, then the final reply.
// The event frames carry poold's event records (docs/protocol.md, "events"), not typed here.
struct EventsArgs {
  std::string pool;  // empty: every pool
  bool follow = false;
};

// A final reply with no member (`events` once its stream ends).
struct EmptyReply {};

// --- Dead letters -----------------------------------------------------------------------------

// Which letters (DeadLetterFilter); an absent member matches any. A member of the wrong type
// is refused `bad_request` naming it; reason must be a dead-letter reason
// (docs/dead-letters.md).
struct DlqFilter {
  std::optional<std::string> pool;
  std::optional<std::string> type;
  std::optional<std::string> reason;
  std::optional<std::uint64_t> task_id;
  std::optional<std::int64_t> since_ms;
  std::optional<std::int64_t> until_ms;
};

// `dlq_list`: the filter's members sit beside limit and cursor.
struct DlqListArgs {
  DlqFilter filter;
  std::uint64_t limit = 100;          // poold keeps it within 1..10000
  std::optional<std::string> cursor;  // a previous reply's next_cursor
};

// One letter: its task's account (TaskAccount's members) and the letter's own.
struct DeadLetterEntry {
  TaskAccount task;
  std::uint64_t letter_id = 0;
  std::string pool;
  std::int64_t dead_lettered_ms = 0;
  std::uint64_t payload_bytes = 0;
};

struct DlqListReply {
  std::vector<DeadLetterEntry> entries;
  std::optional<std::string> next_cursor;  // absent on the last page
};

// `dlq_show`: the letter id; the reply's blob carries the payload.
struct DlqShowArgs {
  std::uint64_t id = 0;
};

// The submit options the letter's task had.
struct LetterOptions {
  std::int32_t priority = 0;
  std::string key;
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
  std::optional<std::uint32_t> retries;
};

struct DlqShowReply {
  DeadLetterEntry letter;
  LetterOptions options;
};

// `dlq_replay`, `dlq_purge`: one of id, filter, (purge only) older_than_ms, or all, tried in
// that order.
struct DlqSelector {
  std::optional<std::uint64_t> id;
  std::optional<DlqFilter> filter;
  std::optional<std::chrono::milliseconds> older_than_ms;  // dlq_purge only
  bool all = false;
};

struct DlqReplayReply {
  std::vector<std::uint64_t> ids;  // the new tasks' ids (wire: also their count, `replayed`)
  std::uint64_t failed = 0;
  std::string first_error;  // "" when none (then absent on the wire)
};

struct DlqPurgeReply {
  std::uint64_t purged = 0;
};

// `dlq_import`: the spill-file lines travel in the request's blob; source and first_line
// name them in a parse error.
struct DlqImportArgs {
  std::string source = "request";
  std::uint64_t first_line = 1;  // from 1
};

struct DlqImportReply {
  std::uint64_t imported = 0;
  std::uint64_t already_present = 0;
};

// --- Admin: reload, shutdown ------------------------------------------------------------------

// `reload`: a pool the reload reconfigured in place.
struct ReloadReconfigured {
  std::string pool;
  bool rolling_restart = false;  // its workers are replaced one by one
};

// `reload`: a pool whose worker target the reload changed.
struct ReloadScaled {
  std::string pool;
  std::uint32_t workers = 0;
};

// `reload`: a pool the reload could not start or reconfigure (it keeps running as it was).
struct ReloadFailure {
  std::string pool;
  std::string error;
};

struct ReloadReply {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> replaced;
  std::vector<ReloadReconfigured> reconfigured;
  std::vector<ReloadScaled> scaled;
  std::vector<std::string> strategy_changed;
  std::vector<ReloadFailure> failed;
  bool service_section_needs_restart = false;
};

// `shutdown`: how long the pools may take to finish (none: the configured default).
struct ShutdownArgs {
  std::optional<std::chrono::milliseconds> timeout;  // wire: timeout_ms
};

struct ShutdownReply {
  bool stopping = true;
};

// --- Operations ----------------------------------------------------------------------------

// (not `Status`: that would hide sandpool::Status in this namespace)
struct ServerStatus {
  static constexpr std::string_view kName = "status";
  using Args = NoArgs;
  using Reply = StatusReply;
};
struct Events {
  static constexpr std::string_view kName = "events";
  using Args = EventsArgs;
  using Reply = EmptyReply;
};
struct Workers {
  static constexpr std::string_view kName = "workers";
  using Args = PoolFilterArgs;
  using Reply = WorkersReply;
};
struct Stats {
  static constexpr std::string_view kName = "stats";
  using Args = PoolFilterArgs;
  using Reply = StatsReply;
};
struct Task {
  static constexpr std::string_view kName = "task";
  using Args = TaskIdArgs;
  using Reply = TaskAccount;
};
struct Wait {
  static constexpr std::string_view kName = "wait";
  using Args = WaitArgs;
  using Reply = TaskAccount;
};
struct Cancel {
  static constexpr std::string_view kName = "cancel";
  using Args = TaskIdArgs;
  using Reply = CancelReply;
};
struct Scale {
  static constexpr std::string_view kName = "scale";
  using Args = ScaleArgs;
  using Reply = PoolStateReply;
};
struct Strategy {
  static constexpr std::string_view kName = "strategy";
  using Args = StrategyArgs;
  using Reply = PoolStateReply;
};
struct Drain {
  static constexpr std::string_view kName = "drain";
  using Args = PoolArgs;
  using Reply = PoolStateReply;
};
struct Resume {
  static constexpr std::string_view kName = "resume";
  using Args = PoolArgs;
  using Reply = PoolStateReply;
};
struct Restart {
  static constexpr std::string_view kName = "restart";
  using Args = RestartArgs;
  using Reply = PoolStateReply;
};
struct KillWorker {
  static constexpr std::string_view kName = "kill_worker";
  using Args = KillWorkerArgs;
  using Reply = PoolStateReply;
};

struct DlqList {
  static constexpr std::string_view kName = "dlq_list";
  using Args = DlqListArgs;
  using Reply = DlqListReply;
};
struct DlqShow {
  static constexpr std::string_view kName = "dlq_show";
  using Args = DlqShowArgs;
  using Reply = DlqShowReply;
};
struct DlqReplay {
  static constexpr std::string_view kName = "dlq_replay";
  using Args = DlqSelector;
  using Reply = DlqReplayReply;
};
struct DlqPurge {
  static constexpr std::string_view kName = "dlq_purge";
  using Args = DlqSelector;
  using Reply = DlqPurgeReply;
};
struct DlqImport {
  static constexpr std::string_view kName = "dlq_import";
  using Args = DlqImportArgs;
  using Reply = DlqImportReply;
};
struct Reload {
  static constexpr std::string_view kName = "reload";
  using Args = NoArgs;
  using Reply = ReloadReply;
};
struct Shutdown {
  static constexpr std::string_view kName = "shutdown";
  using Args = ShutdownArgs;
  using Reply = ShutdownReply;
};

}  // namespace sandpool::ops
