// The in-process pool: a set of sandboxed worker processes running one plugin, a bounded
// priority queue in front of them, dispatch, supervision and retry.
//
// Thread-safety: every Pool member may be called from any thread. Callbacks in
// SubmitOptions run on the pool's event-loop thread: keep them short and do not call
// blocking Pool members (wait_idle, close) from them.
// Lifetime: ~Pool() calls close(). Tickets stay valid after the Pool is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/pool/pool_options.hpp>
#include <sandpool/pool/task_ref.hpp>
#include <sandpool/task/pool_counts.hpp>
#include <sandpool/task/submit_options.hpp>
#include <sandpool/task/task.hpp>

namespace sandpool {

struct DeadLetterFilter;  // <sandpool/store/dead_letters.hpp>
struct PoolMetrics;       // <sandpool/pool/pool_metrics.hpp>

namespace core {
class PoolLoop;
}  // namespace core

struct SubmitOptions;

// A handle on one submitted task: a future-like result plus state, history and cancel.
// Cheap to copy (shared ownership of the task's record). Thread-safe.
class Ticket {
 public:
  Ticket() = default;
  std::uint64_t id() const;
  TaskState state() const;
  bool done() const { return is_terminal(state()); }
  // Blocks until the task is terminal; returns its account.
  TaskResult wait() const;
  // Returns true iff the task became terminal within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Spins for at most `bound`, never sleeping: reads the task's result on this thread while
  // the pool's loop is parked (the direct end, as wait() does), else watches for its end.
  // Returns true iff the task is terminal. For a caller that has the task's end to act on at
  // once and nothing else to do meanwhile (the Redis feeder's lone task); it burns a CPU.
  bool read_here(std::chrono::microseconds bound) const;
  // A snapshot of the account so far (history grows as attempts end).
  TaskResult snapshot() const;
  // What the task was submitted with: its payload (valid while a Ticket of it lives) and a
  // copy of its options, without on_accepted. Empty for a default Ticket.
  std::string_view payload() const;
  SubmitOptions options() const;
  // In a pool that journals (PoolOptions::dead_letter_store with a journal): blocks until
  // the task is committed to the journal (ok) or refused (an error whose message starts with
  // "storage: "; the task is then cancelled, see docs/journal.md). Without a journal, and
  // for a replayed dead letter (committed before replay() returned): ok at once. Non-blocking:
  // SubmitOptions::on_accepted. Bounded: a commit that hangs past the journal's sync_timeout
  // is answered kTimeout then, and while the journal is failing the answer is a refusal at
  // once (docs/journal.md, "A failing disk").
  Status wait_accepted() const;
  // The same answer when it is in, nullopt while the commit is pending.
  std::optional<Status> acceptance() const;
  // Asks for cancellation (docs/architecture.md: a queued task is cancelled at once; a running one
  // is asked to stop, then killed after the grace period). Returns false iff already terminal or
  // the pool is gone.
  bool cancel() const;

 private:
  friend class Pool;
  friend class core::PoolLoop;
  Ticket(core::TaskPtr rec, std::weak_ptr<core::PoolLoop> loop)
      : rec_(std::move(rec)), loop_(std::move(loop)) {}
  core::TaskPtr rec_;
  std::weak_ptr<core::PoolLoop> loop_;
};

// Which tasks Pool::list() returns; an empty or absent member matches any task.
struct TaskQuery {
  std::string type;
  std::string key;                    // the affinity key (SubmitOptions::key)
  std::optional<std::string> tenant;  // only this tenant's tasks ("": the default tenant's)
  std::optional<TaskState> state;
  std::optional<std::int64_t> since_ms, until_ms;  // submitted within (wall clock, ms)
  std::size_t limit = 100;
};

// A task as Pool::list() found it.
struct TaskListing {
  Ticket ticket;
  std::string key;
  std::int64_t submitted_ms = 0;  // wall clock
};

// One task of Pool::submit_batch.
struct BatchTask {
  std::string type;
  std::string payload;
  SubmitOptions options;
};

// The callbacks of a replayed task (Pool::replay): a dead letter keeps the task's options
// but not its callbacks, which belong to whoever replays it.
struct TaskCallbacks {
  std::function<void(std::uint64_t id, std::string_view data)> on_progress;
  std::function<void(const TaskResult&)> on_done;
};

struct WorkerInfo {
  std::int32_t pid = 0;
  std::string state;  // starting, idle, busy, draining, stopping
  // The worker's slot (0..workers-1: a replacement takes the slot of the worker it
  // replaces) and how many workers ran in that slot before this one (crash or kill
  // replacements, recycling, restarts). A draining worker and its replacement share a slot.
  std::uint32_t slot = 0;
  std::uint64_t restarts = 0;
  std::uint32_t in_flight = 0;
  std::uint64_t tasks_done = 0;
  std::int64_t uptime_ms = 0;
  std::int64_t last_beat_ago_ms = -1;  // since its last heartbeat; -1: none yet (starting)
  // The lock-down the worker reported in effect once ready, "+"-joined
  // ("rlimits+uid:65534+caps:none+landlock:v7+seccomp:strict"); empty while starting.
  std::string isolation;
};

// A lifecycle event, delivered to PoolOptions::on_event on the pool's loop thread.
struct PoolEvent {
  enum class Kind : std::uint8_t {
    kWorkerStarted,  // pid
    kWorkerReady,    // pid
    kWorkerExited,   // pid, outcome (its classification), detail, task_id (the running one)
    kAttemptEnded,   // task_id, pid, attempt, outcome, detail (the error)
    kTaskEnded,      // task_id, state, reason, attempt (how many), detail (the last error)
    kScaled,         // workers (the new target), detail (why: the autoscaler's reason, a scale)
  };
  Kind kind = Kind::kTaskEnded;
  std::uint64_t task_id = 0;
  std::int32_t pid = 0;
  TaskState state = TaskState::kQueued;
  DeadReason reason = DeadReason::kNone;
  Outcome outcome = Outcome::kOk;
  std::uint32_t attempt = 0;
  std::string_view detail;  // valid during the call only
  std::uint32_t workers = 0;
};
std::string_view to_string(PoolEvent::Kind k);

// What a replay of many dead letters did (Pool::replay_matching).
struct ReplayReport {
  std::vector<Ticket> tickets;  // the replayed tasks, in the store's order
  std::uint64_t failed = 0;     // letters that stayed in the store
  std::string first_error;      // why the first of them stayed
};

// What Pool::reconfigure did.
struct ReconfigureReport {
  // The workers' launch spec changed: they are being replaced one at a time.
  bool rolling_restart = false;
};

// The counts (submitted, completed, queued, ...) are PoolCounts' (<sandpool/task/pool_counts.hpp>,
// with the table that names each once).
struct PoolStats : PoolCounts {
  bool crash_loop = false;
  std::uint32_t workers = 0, target_workers = 0;
  // Why the target is what it is: the last change's reason (an autoscale step with the queue
  // wait or idle time that caused it, a scale, a reconfigure); "initial" until one.
  std::string target_reason = "initial";
  // The autoscaler: its steps so far, and the queue wait it read at its last look (the
  // longest any task waiting for a worker had waited, ms; 0 when none waited or the pool does
  // not autoscale).
  std::uint64_t autoscale_up = 0, autoscale_down = 0;
  std::uint64_t queue_wait_ms = 0;
  DispatchStrategy dispatch = DispatchStrategy::kRoundRobin;  // the one in use
  std::string state;  // running, draining, crash_loop, failed, closing, closed
};

// Why `next` cannot be applied in place (Pool::reconfigure) to a pool started with
// `started`, or nullopt when it can. A pool's name and task_types are its for life, and so
// is what its spawner and cgroup tree were built from at start: sandbox.namespaces,
// sandbox.cgroup, and with namespaces the user the id maps name. poold's reload starts a
// new pool for such a change and retires the old one.
std::optional<std::string> needs_new_pool(const PoolOptions& started, const PoolOptions& next);

// Returns an error iff `o`'s worker count, worker_bounds and autoscale policy do not fit
// together: min > max; with autoscale, a step of 0, a zero target_queue_wait or idle_timeout,
// or workers outside the bounds; workers or min 0 without autoscale, or without task_types
// (a pool learns its types from its first worker otherwise). Pool::create and reconfigure
// check it.
Status check_worker_count(const PoolOptions& o);

class Pool {
 public:
  // Starts the workers and waits until the first one is ready, so a plugin that cannot
  // load or init is reported here (kPlugin, with the worker's own message). A pool started
  // with no worker (workers 0: autoscaled from worker_bounds.min 0) returns at once; its
  // plugin is first loaded for its first task.
  static Result<std::unique_ptr<Pool>> create(PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Accepts a task. Errors: kInvalidArgument (unknown type; a timeout outside 1 ms ..
  // max_timeout), kTooLarge (payload over max_payload), kQueueFull, kClosed (closing or
  // failed pool). A refused task is not queued.
  Result<Ticket> submit(std::string type, std::string payload, SubmitOptions options = {});
  // Returns ok iff submit() would accept a task of `type` with a payload of `payload_bytes`
  // and `options` as far as the task itself goes (its type, timeout, schedule, tenant and
  // payload size; not the queue's room or the pool's state), else the error submit() gives.
  // Turns a delay into not_before. For tasks queued elsewhere first (a Redis pool's stream).
  Status check_task(const std::string& type, std::size_t payload_bytes,
                    SubmitOptions& options) const;
  // Submits the tasks in order, each checked as submit() checks it; one result per task. The
  // first queue_full or closed refusal refuses the rest the same way without trying them (no
  // task overtakes an earlier refused one). In a pool that journals, the accepted tasks share
  // one accept() (one transaction: all committed or all refused); `on_accepted` is called
  // once with its answer, on the journal's writer thread or, when the answer came first, by
  // submit_batch() before it returns; each task's SubmitOptions::on_accepted is called too.
  // Without a journal (or with no task accepted) `on_accepted` gets ok before it returns.
  // `shared`: callbacks for every task of the batch that sets neither on_progress nor on_done
  // of its own, kept once for all of them (a per-task copy would cost each queued task its
  // own block, docs/performance.md "Memory per task").
  std::vector<Result<Ticket>> submit_batch(std::vector<BatchTask> tasks,
                                           std::function<void(const Status&)> on_accepted = {},
                                           TaskCallbacks shared = {});
  Status scale(std::uint32_t workers);
  Status set_strategy(DispatchStrategy strategy);
  // Drain: refuse new tasks (kClosed, "draining") while the accepted ones keep running;
  // resume: accept again. Workers are untouched.
  void drain();
  void resume();
  // Replaces every worker (see PoolCore::restart_workers); no task fails for it.
  void restart(bool rolling);
  // Sends `signal` to one of this pool's workers (fault injection). Returns kNotFound when
  // no live worker has that pid.
  Status kill_worker(std::int32_t pid, int signal);
  // Applies `next` to the running pool, keeping its task ids, queued and running tasks,
  // finished records, dead letters and metrics; returns once the loop thread applied it.
  // It takes `next`'s worker_spec() and live() whole (pool_options.hpp). When the launch
  // they build changes (the workers' command line, plugin config or region sizes: from the
  // worker spec, and from timeout and cpu_time through RLIMIT_CPU), every worker is
  // replaced by one started with the new spec, one at a time (a rolling restart: no task
  // fails for it). The rest applies at once: workers (scale), concurrency, dispatch,
  // queue_capacity, health, restart intensity, recycling, cancel_grace, the dead-letter and
  // record bounds; the per-task defaults (timeout, retries, retry, queue_ttl) apply to tasks
  // accepted afterwards. `next`'s identity() must be the pool's (needs_new_pool); its
  // wiring() (worker_path, output limits, task_ids, dead_letter_store, logger, on_event,
  // spawner, seed) is ignored: the pool keeps what it started with.
  // Errors: kInvalidArgument (what needs_new_pool() names; workers or concurrency 0),
  // kPlugin (plugin not found), kClosed (closing or failed pool).
  Result<ReconfigureReport> reconfigure(PoolOptions next);
  // Stops accepting, lets what was accepted run for up to `timeout`, then dead-letters what
  // is left with `reason` (shutdown, or pool_removed when a reload removed the pool;
  // replayable later) and closes. Returns how many tasks were dead-lettered that way. In a
  // pool that journals, with reason shutdown and PoolOptions::shutdown_unfinished kKeep, what
  // is left stays unfinished in the journal instead (the next Pool::create runs it; its
  // tickets here end cancelled, cancel reason shutdown, not written), and the count is of
  // those tasks.
  std::size_t shutdown(std::chrono::milliseconds timeout,
                       DeadReason reason = DeadReason::kShutdown);
  // Blocks until nothing is queued, in flight or waiting for a retry.
  void wait_idle();
  bool wait_idle_for(std::chrono::milliseconds timeout);
  // Stops accepting tasks, finishes every accepted one, stops the workers. Idempotent.
  void close();

  // Exact: answered by the pool's loop thread, after whatever is queued for it.
  PoolStats stats() const;
  // stats() as the loop thread last published it (at most 1 ms old while the pool is busy,
  // current while it is idle): answered at once without waiting for the loop thread, for
  // monitors that poll during heavy load (poold's `status`, /healthz).
  PoolStats stats_snapshot() const;
  // A monitoring snapshot: stats() plus attempts by outcome, dead letters by reason, workers
  // by state, worker RSS and latency histograms. Include <sandpool/pool/pool_metrics.hpp> to use
  // it.
  PoolMetrics metrics() const;
  std::vector<WorkerInfo> workers() const;
  // Dead letters held in memory (the most recent dead_letter_capacity of them).
  std::vector<TaskResult> dead_letters() const;
  // Replays a stored dead letter (PoolOptions::dead_letter_store): the task re-enters this
  // pool with its id, payload and options, fresh attempts and `callbacks`. With a journal,
  // the letter's deletion and the task's reopening in the journal are one transaction
  // (TaskJournal::reopen), committed before this returns: from then on the task is journaled
  // like a submit (a stop that keeps it, or a crash, leaves it open for the next start).
  // Without one, the letter is claimed from the store (DeadLetterStore::claim) before the
  // task is submitted, and put back unchanged when the submit is refused. Either way, of two
  // replays of one letter at once exactly one runs it and the other gets kNotFound. Errors:
  // kNotFound, kInvalidArgument (no store, or a letter of another pool), submit()'s, and the
  // journal's (a storage error; kTimeout when its commit takes over 30 s).
  Result<Ticket> replay(std::uint64_t letter_id, TaskCallbacks callbacks = {});
  // Replays every stored letter of this pool that matches `filter` (its `pool` must be
  // empty or this pool's name) and was dead-lettered before the call, so a replay that
  // dies again is not picked up twice; each task gets `callbacks`. Stops early at
  // queue_full or a closed pool; what was not accepted stays in the store. Errors:
  // kInvalidArgument (no store, another pool), and the store's read errors.
  Result<ReplayReport> replay_matching(DeadLetterFilter filter, TaskCallbacks callbacks = {});
  // Returns a handle on an open task, or on an ended one still kept (task_records_*);
  // empty when this pool does not know the id.
  std::optional<Ticket> find(std::uint64_t task_id) const;
  // The tasks this pool holds (open, or ended and still kept: task_records_*) that match
  // `q`: the open ones first, then the ended ones newest first; at most q.limit. Waits for
  // the loop thread; O(tasks held): for operators, not hot paths.
  std::vector<TaskListing> list(const TaskQuery& q) const;
  // The task types this pool serves.
  const std::vector<std::string>& task_types() const;
  // How the workers are confined, as `poolctl workers` shows it for a worker still starting:
  // "ns:user,pid,net,ipc,uts,mnt+rlimits+seccomp:strict+cgroup:v1" (the namespaces actually in
  // effect, which the kernel may have narrowed; "+cgroup:v1" or "+cgroup:v2" when each worker
  // has its own cgroup; see docs/security.md). Fixed at create.
  const std::string& isolation() const;
  // Wake-up syscalls the manager side has paid so far (benchmarks report them per task).
  std::uint64_t wake_syscalls() const;
  // Tasks submit() dispatched to a worker itself, on the submitting thread, because the
  // pool's loop was idle (the direct hand-off, docs/architecture.md "The loop's claim");
  // benchmarks report them per task.
  std::uint64_t hand_offs() const;
  // Tasks a waiter (Ticket::wait, wait_for) ended itself, on its own thread, by reading its
  // worker's result while the pool's loop was parked (the return half, docs/architecture.md
  // "The loop's claim"); benchmarks report them per task.
  std::uint64_t direct_ends() const;
  // How long the pool's loop thread has been inside its current iteration (ns); 0 while it
  // sleeps or once it ended. A watchdog's view (poold's WatchdogGate); any thread.
  std::int64_t busy_for_ns() const;
  // The longest per-attempt timeout submit() accepts (PoolOptions::max_timeout, as last
  // reconfigured).
  std::chrono::milliseconds max_timeout() const;

 private:
  explicit Pool(std::shared_ptr<core::PoolLoop> loop);
  std::shared_ptr<core::PoolLoop> loop_;
};

}  // namespace sandpool
