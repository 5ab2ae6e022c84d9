// Service: poold's pools behind the control protocol. It owns the dead-letter store, the
// pools named by the config (routing each task to the pool serving its type), the
// idempotency keys and the events hub, and answers every operation of docs/protocol.md
// ("Control protocol"). main.cpp owns the process-level pieces around it (signals, lock,
// control and metrics servers, systemd).
//
// Threads: handle() runs on the control server's thread (sp-control) and never blocks: it
// answers status, events and shutdown itself, hands submits, batches, cancels and pool
// controls to the request thread (sp-request, in arrival order), the reads (stats, workers,
// task, tasks, wait, dlq_list, dlq_show) to the reads thread (sp-reads), and dlq
// replay/purge/import, reload and shutdown to the job thread (sp-jobs): each operation's Lane
// (<sandpool/control/control_ops.hpp>). `wait` timeouts run on their own thread (sp-waits). Each
// pool's loop thread (sp-loop:<pool>) runs the callbacks the service gives its tasks (on_done,
// on_progress) and events. A retired pool shuts down on a thread of its own. metrics(), health()
// and busy_threads() may be called from any thread (the metrics server's, main's).
//
// The lock rule: the service never holds a lock across a call into a Pool (nor into a
// Responder, the store or the hub). It copies what it needs under the lock, releases it, then
// calls. A Pool call may wait for that pool's loop thread (workers(), find(), stats(),
// metrics(), reconfigure(), shutdown() do), and the loop thread takes mu_ when a task ends
// (reply_when_done): a pool call under mu_ is a deadlock. The locks, all leaves (nothing else is
// taken while one is held):
// - mu_: slots_, retiring_, retired_, waiters_, wait_tokens_.
// - watch_mu_: watched_, the pools busy_threads() samples, copied from slots_ and retired_
//   (never while mu_ is held), so the watchdog and /healthz never wait for mu_: a thread
//   stuck while holding it is exactly what they must report.
// - IdempotencyKeys, EventHub, each JobThread: their own, internal.
// Clang checks the rule (<sandpool/thread_annotations.hpp>): each field says GUARDED_BY its
// lock, and a member that takes mu_ or calls a Pool says EXCLUDES(mu_), so calling it with mu_
// held does not compile in the clang trees.
// No lock serialises reload and shutdown: both run on the job thread, the only thread that
// changes config_ and the set of pools once the service has started.
//
// Lifetime: destroy the ControlServer and MetricsServer before the Service (they call it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/control/control_ops.hpp>
#include <sandpool/metrics/metrics.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_metrics.hpp>
#include <sandpool/schedule/schedule_store.hpp>
#include <sandpool/schedule/scheduler.hpp>
#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>

#include <sandpool/control/op_responder.hpp>
#include <sandpool/service/ack_gate.hpp>
#include <sandpool/service/event_hub.hpp>
#include <sandpool/service/idempotency.hpp>
#include <sandpool/service/job_thread.hpp>
#include <sandpool/service/progress_coalescer.hpp>
#include <sandpool/service/redis_pools.hpp>
#include <sandpool/service/schedule_clock.hpp>
#include <sandpool/service/wait_deadlines.hpp>
#include <sandpool/service/watchdog_gate.hpp>

namespace spdlog {
class logger;
}

namespace sandpool::poold {

// Resolves the config's relative paths against the working directory (in place).
void make_paths_absolute(Config& config);

class Service final : public ControlHandler {
 public:
  // Called (from the job thread) when a `shutdown` request was answered; main then runs
  // the shutdown with the request's timeout (nullopt: the config's shutdown_timeout).
  using ShutdownRequest = std::function<void(std::optional<std::chrono::milliseconds>)>;

  // Opens the store under state_dir and creates every pool (each waits for its first
  // worker). `config` has absolute paths. Errors name the pool that could not start.
  static Result<std::unique_ptr<Service>> start(Config config, std::string config_path,
                                                std::shared_ptr<spdlog::logger> log,
                                                ShutdownRequest on_shutdown);
  ~Service() override EXCLUDES(mu_);

  void handle(Request request, Responder responder) override EXCLUDES(mu_);

  // Queues a reload on the job thread (SIGHUP): it re-reads the config file; invalid: the
  // error, and the running config stays. Otherwise it applies the differences
  // (docs/operations.md, "Reload"). `done` gets what changed, on the job thread.
  void reload_async(std::function<void(const Result<ops::ReloadReply>&)> done);
  // Stops accepting tasks; then, on the job thread after whatever job runs there, shuts
  // every pool down in parallel (each waits up to `timeout`, then keeps what is left in the
  // journal or dead-letters it with reason shutdown: service.shutdown_unfinished), then
  // flushes and closes the store. Returns when that is done.
  void shutdown(std::chrono::milliseconds timeout);
  bool stopping() const { return stopping_.load(); }
  // The HTTP listener's address, which `status` reports as `http` (main, once it listens).
  void set_http_address(std::string address) EXCLUDES(http_mu_) {
    MutexLock lock(http_mu_);
    http_address_ = std::move(address);
  }

  std::vector<PoolMetrics> metrics() const EXCLUDES(mu_);
  DeadLetterStoreStats dead_letter_stats() const;           // any thread
  std::optional<TaskJournalStats> journal_stats() const;    // any thread; empty: no journal
  std::vector<RedisPoolFigures> redis_figures() const;      // any thread; empty: no Redis pool
  std::optional<std::string> health() const EXCLUDES(mu_);  // nullopt: healthy
  const Config& config() const { return config_; }          // the running one; job thread only
  // The service's threads that take items of work, each with how long it has been inside
  // its current one: every pool's loop (sp-loop:<pool>, retiring ones included), sp-request,
  // sp-reads and sp-jobs (main adds the control server's). For the WatchdogGate.
  std::vector<ThreadBusy> busy_threads() const EXCLUDES(watch_mu_);
  // The schedules and what each did (docs/schedules.md); any thread.
  std::vector<ScheduleState> schedules() const;

 private:
  struct Slot {
    PoolConfig config;
    std::shared_ptr<Pool> pool;
  };

  Service(Config config, std::string config_path, std::shared_ptr<spdlog::logger> log,
          ShutdownRequest on_shutdown);
  // The options of a configured pool: the config's, plus the service's ids, store, logger
  // and events hub.
  PoolOptions pool_options(const PoolConfig& pc) const;
  // `recover`: with the journal, the pool queues its unfinished tasks again (at start only:
  // a pool a reload makes may replace one whose tasks are still running).
  Result<std::shared_ptr<Pool>> make_pool(const PoolConfig& pc, bool recover) EXCLUDES(mu_);
  // A Redis pool's local pool starts reading its stream (redis_pools.hpp).
  Status attach_redis(const PoolConfig& pc, Pool& pool);

  // service_redis.cpp: the operations on the Redis pools' tasks (docs/redis-pools.md).
  // The Redis pool a submit routes to (by its pool, else its type); nullopt: a local one, or
  // none (the local routing answers).
  std::optional<std::string> redis_route(const std::string& pool, const std::string& type) const;
  void submit_redis(const std::string& pool, const Request& req, const ops::SubmitArgs& a,
                    const OpResponder<ops::Submit>& res);
  // A batch whose tasks all go to Redis pools; false: some go elsewhere (not handled here).
  bool submit_batch_redis(const Request& req, const ops::SubmitBatchArgs& a,
                          const OpResponder<ops::SubmitBatch>& res);
  void serve_redis_task(std::uint64_t id, bool with_result, const Responder& res);
  void wait_redis(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout,
                  bool with_result, const Responder& res);

  // service_journal.cpp: the task journal (docs/journal.md, "In poold").
  static DeadLetterStoreOptions store_options(const Config& config,
                                              std::shared_ptr<spdlog::logger> log);
  TaskJournal* journal() const;  // null: service.journal is off
  // At start, before the pools: the unfinished tasks of pools the config no longer has are
  // dead-lettered `pool_removed`.
  Status dead_letter_removed_pools();
  // PoolOptions::recovered_on_done: the key is remembered again; the end is kept as a
  // submitted task's is.
  std::function<void(const TaskResult&)> recovered_on_done(std::uint64_t id,
                                                           const std::string& key);
  // A task no pool holds (finished in an earlier run, or forgotten by its pool), from the
  // journal; nullopt without one or when it does not know the id.
  std::optional<TaskResult> journaled_task(std::uint64_t id) const;
  // What an idempotency key names: the keys kept in memory, else the journal's.
  std::optional<KeptTask> known_key(const std::string& key);
  // Every submit's answer from the journal: the last refusal for the storage's sake is
  // `status`'s journal.storage_error while the journal is failing.
  void note_acceptance(const Status& s) EXCLUDES(storage_mu_);
  // Why the storage cannot take submits or writes now (the journal is failing); nullopt: it
  // can.
  std::optional<std::string> storage_problem() const;
  // `status`; empty: no journal.
  std::optional<ops::JournalStatus> journal_status() const EXCLUDES(storage_mu_);
  // The pool named `name` (error not_found), or serving `type` when name is empty.
  // Each of these takes mu_ or calls a Pool (the lock rule): EXCLUDES(mu_).
  Result<std::shared_ptr<Pool>> pool_named(const std::string& name) const EXCLUDES(mu_);
  Result<std::shared_ptr<Pool>> route(const std::string& pool, const std::string& type) const
      EXCLUDES(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> pools() const EXCLUDES(mu_);
  // The pools being retired that still exist, by name.
  std::vector<std::pair<std::string, std::shared_ptr<Pool>>> retired_pools() const EXCLUDES(mu_);
  std::optional<Ticket> find_task(std::uint64_t id) const EXCLUDES(mu_);
  // Job thread: see reload_async().
  Result<ops::ReloadReply> reload() EXCLUDES(mu_);
  // reload()'s steps, in order: the pools `next` no longer names leave routing and drain;
  // then each pool of `next` is left as it runs, replaced by a new pool (replace_pool), or
  // reconfigured in place (reconfigure_pool). Each says what it did, or why not, in `out`.
  void remove_pools_not_in(const Config& next, ops::ReloadReply& out) EXCLUDES(mu_);
  void reload_pool(const PoolConfig& pc, ops::ReloadReply& out) EXCLUDES(mu_);
  void replace_pool(const PoolConfig& pc, const std::optional<Slot>& current, ops::ReloadReply& out)
      EXCLUDES(mu_);
  void reconfigure_pool(const PoolConfig& pc, const Slot& current, ops::ReloadReply& out)
      EXCLUDES(mu_);
  void shut_down_pools(std::chrono::milliseconds timeout) EXCLUDES(mu_);
  // Copies the pool table and the retired pools into watched_ (after either changed: start,
  // job thread).
  void refresh_watch_list() EXCLUDES(mu_, watch_mu_);
  // Drains `pool` and shuts it down on a thread of its own (removed or replaced pools);
  // what is left after shutdown_timeout is dead-lettered `pool_removed`.
  void retire(std::string name, std::shared_ptr<Pool> pool) EXCLUDES(mu_);

  // service_schedules.cpp: the periodic schedules (docs/schedules.md), run by scheduler_ on
  // sched_thread_ (sp-sched), each slot submitted by submit_slot (submit_one, then the
  // journal's answer awaited on that thread).
  class Slots;
  Status start_schedules();  // at start, after the pools
  // Start and reload (job thread): the config's schedules and those added at run time put
  // (a run-time one the YAML now declares is dropped: the YAML's wins), the others removed.
  Status apply_schedules(const std::vector<ScheduleSpec>& wanted);
  // At start: the schedules added at run time, from schedule_defs into added_schedules_.
  void load_added_schedules();
  void wake_schedules() EXCLUDES(sched_mu_);
  void stop_schedules() EXCLUDES(sched_mu_);  // joins sp-sched; before the pools stop
  void run_schedules() EXCLUDES(sched_mu_);
  // A slot's task (slot_s) or a run-now's (nullopt) under idempotency key `key`.
  Result<SlotAnswer> submit_slot(const ScheduleSpec& spec, const std::string& key,
                                 std::optional<std::int64_t> slot_s);
  // submit_slot() into Redis pool `pool`: a slot is claimed in Redis with its submit
  // (RedisPools::claim_slot), a run-now only submitted.
  Result<SlotAnswer> submit_slot_redis(const std::string& pool, const ScheduleSpec& spec,
                                       const ops::SubmitArgs& a,
                                       std::optional<std::int64_t> slot_s);
  void serve(const Request& req, const ops::NoArgs& a, const OpResponder<ops::ScheduleList>& res);
  void serve(const Request& req, const ops::ScheduleNameArgs& a,
             const OpResponder<ops::ScheduleShow>& res);
  void serve(const Request& req, const ops::ScheduleNameArgs& a,
             const OpResponder<ops::SchedulePause>& res);
  void serve(const Request& req, const ops::ScheduleNameArgs& a,
             const OpResponder<ops::ScheduleResume>& res);
  void serve(const Request& req, const ops::ScheduleNameArgs& a,
             const OpResponder<ops::ScheduleRunNow>& res);
  // Job thread: a schedule added or removed at run time (kept in schedule_defs).
  void serve(const Request& req, const ops::ScheduleAddArgs& a,
             const OpResponder<ops::ScheduleAdd>& res);
  void serve(const Request& req, const ops::ScheduleNameArgs& a,
             const OpResponder<ops::ScheduleRemove>& res);
  // Job thread: pauses or resumes `name`. A Redis pool's schedule on every node (its claim
  // hash in Redis; a resume resumes this node's own pause too), any other on this node (kept
  // in the state dir's database).
  Status pause_schedule(const std::string& name, bool paused);
  // True iff the YAML (config_.schedules) declares `name`; job thread.
  bool declared_schedule(const std::string& name) const;

  // service_dispatch.cpp: runs the handler of req.op (on the thread of its lane). Every
  // operation of ops::AllOps has one, generated: Op's arguments decoded (a malformed one is
  // refused `bad_request` naming the field), then serve(req, args, OpResponder<Op>) below,
  // the overload for Op (a missing one does not compile).
  void run(const Request& req, const Responder& res);
  using Handler = void (*)(Service&, const Request&, const Responder&);
  template <class Op>
  static void run_typed(Service& s, const Request& req, const Responder& res);
  static const std::map<std::string_view, Handler>& handlers();

  // The handlers, one serve() per operation, by the file that has them.

  // service_tasks.cpp
  void serve(const Request& req, const ops::SubmitArgs& a, const OpResponder<ops::Submit>& res);
  void serve(const Request& req, const ops::SubmitBatchArgs& a,
             const OpResponder<ops::SubmitBatch>& res);
  void serve(const Request& req, const ops::TaskIdArgs& a, const OpResponder<ops::Task>& res);
  void serve(const Request& req, const ops::TaskIdArgs& a, const OpResponder<ops::Cancel>& res);
  void serve(const Request& req, const ops::TaskListArgs& a, const OpResponder<ops::TaskList>& res);
  // What submit_one found or made: a new task, or the one an idempotency key names (with
  // the pool's record of it, or else the final account the key kept).
  struct Submission {
    std::uint64_t id = 0;
    bool existing = false;
    std::optional<Ticket> ticket;  // empty: the pool forgot the task; `kept` has it
    std::optional<KeptTask> kept;
  };
  // `res` (a waited submit's responder) is answered when the task ends; a resubmit of an
  // open task with a known key is answered when that task ends.
  // The task's on_accepted answers `gate` as task `index` of the request.
  Result<Submission> submit_one(const ops::SubmitArgs& args, std::string payload, bool wait,
                                bool progress, const Responder* res,
                                const std::shared_ptr<AckGate>& gate, std::size_t index);
  // A submit whose idempotency key named a task that exists: its id, or its account (wait).
  void answer_existing(const ops::SubmitArgs& a, const Submission& s,
                       const OpResponder<ops::Submit>& res);
  // A batch whose tasks share `defaults` (no key): routed once, one Pool::submit_batch.
  void submit_shared_batch(const std::string& blob, const std::vector<std::uint64_t>& lens,
                           const ops::SubmitArgs& defaults, const std::shared_ptr<AckGate>& gate,
                           ops::SubmitBatchReply* out);
  // The task a known key names, registering `waiter` if it is still open; nullopt when
  // neither a pool nor the key knows it any more.
  std::optional<Submission> existing_task(const KeptTask& kept, const Responder* waiter)
      EXCLUDES(mu_);
  // A task of the service ended (on its pool's loop thread): the key it was submitted with
  // (empty: whichever key names its id) keeps its account, and its waiters are answered.
  void task_ended(const std::string& key, const TaskResult& result);
  // Answers the waiters of `task_id` (every task the service runs calls this as it ends).
  void reply_when_done(std::uint64_t task_id, const TaskResult& result) EXCLUDES(mu_);
  // The callbacks poold gives a replayed task (task_ended when it ends).
  TaskCallbacks replay_callbacks();
  // service_wait.cpp (reads thread): answers when the task ends or the wait's timeout passes.
  void serve(const Request& req, const ops::WaitArgs& a, const OpResponder<ops::Wait>& res)
      EXCLUDES(mu_);
  // A wait's timeout passed (sp-waits): answers it with the task as it is now.
  void wait_expired(std::uint64_t task_id, std::uint64_t token) EXCLUDES(mu_);
  // service_admin.cpp
  void serve(const Request& req, const ops::NoArgs& a, const OpResponder<ops::ServerStatus>& res)
      EXCLUDES(mu_, http_mu_, storage_mu_);
  void serve(const Request& req, const ops::NoArgs& a, const OpResponder<ops::Version>& res);
  void serve(const Request& req, const ops::PoolFilterArgs& a, const OpResponder<ops::Stats>& res);
  void serve(const Request& req, const ops::PoolFilterArgs& a,
             const OpResponder<ops::Workers>& res);
  // The pool a pool control names (not_found), with its config.
  Result<std::pair<PoolConfig, std::shared_ptr<Pool>>> controlled_pool(const std::string& name)
      EXCLUDES(mu_);
  void serve(const Request& req, const ops::ScaleArgs& a, const OpResponder<ops::Scale>& res);
  void serve(const Request& req, const ops::StrategyArgs& a, const OpResponder<ops::Strategy>& res);
  void serve(const Request& req, const ops::PoolArgs& a, const OpResponder<ops::Drain>& res);
  void serve(const Request& req, const ops::PoolArgs& a, const OpResponder<ops::Resume>& res);
  void serve(const Request& req, const ops::RestartArgs& a, const OpResponder<ops::Restart>& res);
  void serve(const Request& req, const ops::KillWorkerArgs& a,
             const OpResponder<ops::KillWorker>& res);
  // service_dlq.cpp (job thread; list and show on the reads thread)
  void serve(const Request& req, const ops::DlqListArgs& a, const OpResponder<ops::DlqList>& res);
  void serve(const Request& req, const ops::DlqShowArgs& a, const OpResponder<ops::DlqShow>& res);
  void serve(const Request& req, const ops::DlqSelector& a, const OpResponder<ops::DlqReplay>& res);
  void serve(const Request& req, const ops::DlqSelector& a, const OpResponder<ops::DlqPurge>& res);
  Result<ops::DlqReplayReply> dlq_replay(const ops::DlqSelector& a);
  Result<ops::DlqPurgeReply> dlq_purge(const ops::DlqSelector& a);
  // service_dlq_import.cpp (job thread): letters from a spill file into the store.
  void serve(const Request& req, const ops::DlqImportArgs& a,
             const OpResponder<ops::DlqImport>& res);
  // service_dispatch.cpp: events, reload and shutdown.
  void serve(const Request& req, const ops::EventsArgs& a, const OpResponder<ops::Events>& res);
  void serve(const Request& req, const ops::NoArgs& a, const OpResponder<ops::Reload>& res);
  void serve(const Request& req, const ops::ShutdownArgs& a, const OpResponder<ops::Shutdown>& res);

  Config config_;  // the running config; changed by reload, on the job thread only
  const std::string config_path_;
  std::shared_ptr<spdlog::logger> log_;
  ShutdownRequest on_shutdown_;
  const std::int64_t started_ms_;
  std::shared_ptr<std::atomic<std::uint64_t>> task_ids_;
  std::shared_ptr<DeadLetterStore> store_;
  // The Redis pools' feeders and requests; null: no pool has backend redis. Reset before
  // the pools go (its feeders run tasks in them).
  std::unique_ptr<RedisPools> redis_;
  std::shared_ptr<EventHub> hub_;
  std::shared_ptr<ProgressCoalescer> progress_ = ProgressCoalescer::create();
  IdempotencyKeys idempotency_;
  std::atomic<bool> stopping_{false};
  mutable Mutex http_mu_;  // a leaf, like the others
  std::string http_address_ GUARDED_BY(http_mu_);
  // note_acceptance(): wall ms of the last commit and the last storage refusal, and why.
  std::atomic<std::int64_t> last_accepted_ms_{0};
  std::atomic<std::int64_t> last_refused_ms_{0};
  mutable Mutex storage_mu_;  // a leaf
  std::string storage_error_ GUARDED_BY(storage_mu_);

  mutable Mutex mu_;
  std::map<std::string, Slot> slots_ GUARDED_BY(mu_);  // the configured pools, by name
  std::vector<std::thread> retiring_ GUARDED_BY(mu_);  // one per pool being drained away
  // Still found by task id while they drain (and watched by busy_threads()), by name.
  std::vector<std::pair<std::string, std::weak_ptr<Pool>>> retired_ GUARDED_BY(mu_);
  // Who waits for a still-open task: waited resubmits (idempotency) and `wait` requests.
  // Answered when it ends (reply_when_done), a `wait` also when its timeout passes (token).
  struct Waiter {
    Responder res;
    std::uint64_t token = 0;  // 0: no timeout
    bool with_result = true;  // false: a read peer, the result withheld
  };
  std::multimap<std::uint64_t, Waiter> waiters_ GUARDED_BY(mu_);
  std::uint64_t wait_tokens_ GUARDED_BY(mu_) = 0;
  mutable Mutex watch_mu_;
  // By thread name.
  std::vector<std::pair<std::string, std::weak_ptr<Pool>>> watched_ GUARDED_BY(watch_mu_);

  // The schedules (service_schedules.cpp); set by start_schedules, then only read.
  std::unique_ptr<ScheduleWallClock> schedule_clock_;
  std::unique_ptr<SqliteScheduleStore> schedule_store_;
  // The schedules added at run time (schedule_add), by name, as kept in schedule_defs; never
  // a name the YAML declares. The job thread's (add, remove, reload; start before it).
  std::map<std::string, ScheduleSpec> added_schedules_;
  std::unique_ptr<SlotSubmitter> slots_submitter_;
  std::unique_ptr<Scheduler> scheduler_;
  Mutex sched_mu_;  // a leaf
  CondVar sched_cv_;
  bool sched_stop_ GUARDED_BY(sched_mu_) = false;
  bool sched_wake_ GUARDED_BY(sched_mu_) = false;
  std::thread sched_thread_;

  // The timeouts of `wait` requests (sp-waits); before the maps it reaches: destroyed first.
  WaitDeadlines deadlines_{
      [this](std::uint64_t task_id, std::uint64_t token) { wait_expired(task_id, token); }};
  // Lane::kRequests: submits, batches, cancels, pool control, in arrival order.
  JobThread requests_{"sp-request"};
  // Lane::kReads: stats, workers, task, wait, dlq_list, dlq_show; never queued behind
  // submits, batches or reloads.
  JobThread reads_{"sp-reads"};
  // dlq replay/purge/import, reload and shutdown; last: destroyed (joined) first.
  JobThread jobs_{"sp-jobs"};
};

// The submit options of one task, each checked against the range its type does not give
// (the decode checked the types): timeout_ms 1..`max_timeout`.
Status submit_options(const ops::SubmitArgs& a, std::chrono::milliseconds max_timeout,
                      SubmitOptions* o);

// A schedule as the schedule operations and `status` report it.
ops::ScheduleInfo schedule_info(const ScheduleState& s);
// The schedule schedule_add declares, checked as the YAML's are; or why it is refused.
Result<ScheduleSpec> schedule_of(const ops::ScheduleAddArgs& a);

// The account of a task (the `task` and `wait` replies and a waited submit's final reply).
ops::TaskAccount account_of(const TaskResult& r);
nlohmann::json task_json(const TaskResult& r);  // account_of, encoded
// Answers `res` with the account of `r`, the result in the blob when `with_result` (an
// admin peer), else withheld (`result_withheld` when there is one).
// `submitted`: what the task was submitted with (the `task` reply, for a task held in memory).
void answer_with_account(const Responder& res, const TaskResult& r, bool with_result,
                         std::optional<ops::TaskSubmission> submitted = std::nullopt);

}  // namespace sandpool::poold
