// The pool's event loop: one thread that owns a PoolCore and runs it against real workers.
// The jobs around it are classes of their own: plan_launch() decides how workers are
// launched, WorkerLinks is the core's WorkerControl over real processes, rings and a Poller,
// LoopMailbox is what other threads share with the loop. PoolLoop wires them and runs the
// loop (run()); its public members are the Pool's, thread-safe unless said otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/base/busy_clock.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/store/task_journal.hpp>

#include "core/host_facts.hpp"
#include "core/loop_claim.hpp"
#include "core/loop_mailbox.hpp"
#include "core/plan_launch.hpp"
#include "core/poller.hpp"
#include "core/pool_core.hpp"
#include "core/worker_links.hpp"

namespace spdlog {
class logger;
}

namespace sandpool {
class TaskJournal;
}

namespace sandpool::core {

// Ends a task whose pool is gone when its letter or journaled end is written: its account is
// final (the core wrote it when it decided the end), only the write was missing. The pool's
// counters went with the pool.
void end_orphaned(TaskRecord& task, TaskState state);

// The journaled end of the task (`reached`: its end, or its letter) did not become durable:
// the store closed first, refused it, or took its letter only into a spill file. The journal
// keeps the task open and the next start runs it again, so it is reported as a stop that
// keeps it (cancelled, reason shutdown) with `why`, never as the end it reached. Any thread,
// before the task's end is posted or applied.
void report_unwritten(TaskRecord& task, const std::string& why);

// While tasks run, the loop looks at the workers' headers (their `running` state) at least
// this often, however far its next deadline.
inline constexpr std::int64_t kRunningPollMs = 10;

class PoolLoop final : public std::enable_shared_from_this<PoolLoop> {
 public:
  // Starts the loop thread and the workers; returns once the first worker is ready, or
  // the plugin's error when the first one cannot load or init.
  static Result<std::shared_ptr<PoolLoop>> start(PoolOptions options);
  ~PoolLoop();

  // Thread-safe entry points (see Pool).
  // id 0: a fresh id; otherwise the task keeps that id (a dead letter's replay).
  // `options` is moved from (Pool::submit's by-value parameter, handed down by reference).
  Result<Ticket> submit(std::string type, std::string payload, SubmitOptions&& options,
                        std::uint64_t id = 0);
  // Pool::replay with a journal: `letter`'s task re-enters this pool under its id once the
  // journal reopened it and deleted the letter in one transaction (TaskJournal::reopen),
  // waited for here up to kReplayCommitWait; from then on it is journaled like a submit.
  Result<Ticket> replay(const DeadLetter& letter, SubmitOptions options);
  // See Pool::submit_batch.
  std::vector<Result<Ticket>> submit_batch(std::vector<BatchTask> tasks,
                                           std::function<void(const Status&)> on_accepted,
                                           TaskCallbacks shared);
  // Any thread may read the pool's identity here (name, task_types, task_ids,
  // dead_letter_store, logger, worker_path): reconfigure() never writes those. The other
  // fields belong to the loop thread.
  const PoolOptions& options() const { return opts_; }
  // See Pool::reconfigure. Validates and plans on the caller's thread, applies on the loop
  // thread.
  Result<ReconfigureReport> reconfigure(PoolOptions next);
  bool cancel(const TaskPtr& task);
  void set_draining(bool on) { draining_.store(on); }
  bool draining() const { return draining_.load(); }
  // Stops taking new submits (close() follows). After it returns no submit is accepted.
  void stop_accepting() { mailbox_.stop_accepting(); }
  // Whether Pool::shutdown(reason) leaves what is still open in the journal
  // (PoolOptions::shutdown_unfinished) instead of dead-lettering it.
  bool keeps_unfinished(DeadReason reason) const;
  // Sends a signal to the live worker with this pid; false when there is none.
  bool signal_worker(std::int32_t pid, int sig);
  // Runs fn on the loop thread (or inline once the loop has ended) and returns its value.
  template <typename R>
  R query(std::function<R(PoolCore&, std::int64_t now)> fn) {
    return mailbox_.query<R>(std::move(fn), *core_);
  }
  void post(LoopCommand fn) { mailbox_.post(std::move(fn)); }
  // PoolCore::stats() as the loop last published it: at most 1 ms old while the loop is
  // busy, current while it sleeps, and taken after every command posted before the call (a
  // scale, a reconfigure); otherwise (a command still queued, or the loop ended) exact, by
  // query. So a monitor is answered at once however many tasks are queued ahead of it.
  PoolStats published_stats();
  bool wait_idle_for(std::int64_t timeout_ms) { return mailbox_.wait_idle_for(timeout_ms); }
  void close();
  const std::vector<std::string>& task_types() const { return task_types_.names(); }
  // The isolation workers run under as configured (sandbox::describe_isolation, plus the
  // cgroup); set before the loop thread starts, immutable after.
  const std::string& isolation() const { return isolation_; }
  // Wake-up syscalls the manager side has made (futex wakes, eventfd signals): the
  // benchmark reports them per task.
  std::uint64_t wake_syscalls() const {
    return mailbox_.bell_rings() + (links_ ? links_->wakes() : 0);
  }
  // Tasks submit() dispatched itself, under the loop's claim, while the loop was idle (the
  // direct hand-off): the benchmark reports them per round trip.
  std::uint64_t hand_offs() const { return hand_offs_.load(std::memory_order_relaxed); }
  // The return half (Ticket::wait, wait_for): a waiter whose task is in flight on a worker,
  // the loop parked, takes the claim and reads that worker's results itself, for at most
  // kDirectWaitNs and never past until_ns, handing the claim back at once when the loop has
  // work (pool_loop_hand_off.cpp). Returns true iff the task ended on this thread. Any thread.
  bool direct_wait(const TaskPtr& task, std::int64_t until_ns);
  // Tasks direct_wait() ended on the waiting thread.
  std::uint64_t direct_ends() const { return direct_ends_.load(std::memory_order_relaxed); }
  // For poold's watchdog: how long the loop thread has been inside its current
  // iteration; 0 while it sleeps or once it ended. Any thread.
  std::int64_t busy_for_ns() const {
    return mailbox_.ended() ? 0 : busy_.busy_for_ns(ipc::monotonic_ns());
  }
  std::chrono::milliseconds max_timeout() const {
    return std::chrono::milliseconds(max_timeout_ms_.load(std::memory_order_relaxed));
  }

  // Returns ok iff a task of `type` with a payload of `payload_bytes` and `options` passes
  // submit()'s checks of the task itself (Pool::check_task); turns a delay into not_before.
  Status check_task(const std::string& type, std::size_t payload_bytes,
                    SubmitOptions& options) const;

 private:
  explicit PoolLoop(PoolOptions options);
  Status launch();
  // Before the loop runs: probes host_ once (privileges, the clone3 spawner's namespaces,
  // cgroups); fails when the privileges refuse, before the other probes.
  Status probe_host(std::string worker_path);
  // Before the loop runs: the poller, the mailbox's bell, the links with the plan's launch
  // spec and isolation, and the core.
  Status wire(LaunchPlan plan);
  // Loop thread: takes `next`'s changeable fields and its planned launch spec; returns true
  // iff the launch spec changed.
  bool apply_options(const PoolOptions& next, const supervision::LaunchSpec& spec);
  // Loop thread, for each Ready: the first decides the task types the pool serves; later
  // ones are checked against them (check_declared_types).
  void on_declared(const std::vector<std::string>& declared);
  // A worker's plugin declared `declared` (empty: nothing); the pool serves task_types_.
  void check_declared_types(const std::vector<std::string>& declared);
  // Loop thread: raises max_payload_ to a reconfigured, larger value once no worker started
  // with the old launch spec takes tasks any more.
  void release_pending_max_payload();
  void run();
  // One turn of the loop: mail, results, deadlines, spawn failures, flushes. Returns true
  // iff it found work.
  bool iterate(std::int64_t now);
  bool drain_mailbox(std::int64_t now);
  // pool_loop_hand_off.cpp. Spins until mail or a result comes (true) or until_ns passes
  // (false), without the claim: a submitter may hand a task off meanwhile.
  bool spin_for_work(std::int64_t until_ns) REQUIRES(claim_);
  // Sleeps at most timeout_ms (0: only looks) for worker events and mail; parked, it lets go
  // of the claim.
  void wait_for_events(std::int64_t timeout_ms, std::int64_t now) REQUIRES(claim_);
  // wait_for_events()'s sleep: epoll_wait for at most timeout_ms (> 0) into events[64],
  // without the claim.
  Result<int> park(epoll_event* events, std::int64_t timeout_ms, std::int64_t now) REQUIRES(claim_);
  // submit(), for a task not journaled: when the loop is idle, takes the claim and runs the
  // core's hand_off() of the task (it reaches a worker's ring without a loop pass). Returns
  // true iff the core took the task in; false: post it as usual.
  bool try_hand_off(const TaskPtr& task);
  // Under the claim: a hand-off's task may go to a worker only if the idle loop looks at the
  // pool by its deadline and by the running poll (kRunningPollMs) on its own.
  bool loop_looks_in_time(const TaskRecord& task, std::int64_t now) const REQUIRES(claim_);
  // direct_wait()'s read, the loop parked: spins on `w`'s result ring and reads it as the
  // loop's pass would, until the task ends, the bound passes or the loop wants the claim;
  // then re-arms the loop's sleep. Returns true iff the task ended.
  bool read_own_result(const TaskPtr& task, WorkerId w, std::int64_t until_ns) REQUIRES(claim_);
  // A waiter read (or wanted to read) its own result: for kDirectQuietNs the loop parks
  // instead of spinning for work, leaving the result rings to the waiters.
  void ask_to_park() { direct_wanted_ns_.store(ipc::monotonic_ns(), std::memory_order_relaxed); }
  bool parks_for_waiters(std::int64_t now) const {
    return now - direct_wanted_ns_.load(std::memory_order_relaxed) < kDirectQuietNs;
  }
  void after_iteration();
  // Loop thread: publishes core_->stats() for published_stats() when `force` or when the
  // last copy is 1 ms old.
  void publish_stats(std::int64_t now, bool force);

  // pool_loop_letters.cpp: dead letters through opts_.dead_letter_store. The sink hands each
  // letter to the store and keeps its task open until the store's receipt; the receipt ends
  // the task on the loop thread (letter_written), or inline once the loop has ended.
  void install_dead_letter_sink();
  void letter_written(std::uint64_t task_id);
  bool receipt_inline_ = false;  // loop thread: the store answered within enqueue() itself

  // Returns ok iff the submit options' scheduling and tenant are valid; turns a delay into
  // not_before (the journal keeps the absolute time).
  static Status check_schedule(SubmitOptions& options);
  // The error a submit of a task type the pool does not serve gets.
  Status unknown_type(std::string_view type) const;
  // check_task()'s checks, in its order; returns the task's type as its record keeps it (the
  // pool's interned one).
  Result<TaskType> checked_type(std::string_view type, std::size_t payload_bytes,
                                SubmitOptions& options) const;
  // submit()'s checks, admission and id; the record's ack is settled unless it is to be
  // journaled (id 0 in a pool with a journal).
  // `shared`: a batch's callbacks, for the tasks that set none of their own.
  Result<TaskPtr> admit_task(std::string type, std::string payload, SubmitOptions&& options,
                             std::uint64_t id, const PackedOptions::Callbacks& shared = {});
  // Hands an admitted task to the loop; false when the pool closes (its admission is undone,
  // and with `end_if_closed` its journal row is ended `cancelled`; a replay's stays open for
  // the next start).
  bool post_admitted(const TaskPtr& task, bool end_if_closed = true);
  // The same for a batch's tasks, in order, in one hand-over: all posted, or none.
  bool post_admitted(const std::vector<TaskPtr>& tasks);
  // A task the closing pool refused: undoes its admission, ends its journal row as above.
  void refuse_closing(const TaskPtr& task, bool end_if_closed);
  // Undoes admit_task()'s admission (queue capacity, tenant count).
  void unadmit(const TaskPtr& task);

  // A batch's acknowledgement (Pool::submit_batch): the journal's answer and the end of
  // submit_batch(), whichever comes second, call `callback`.
  struct BatchAck {
    std::function<void(const Status&)> callback;
    Mutex mu;
    bool released GUARDED_BY(mu) = false;
    std::optional<Status> answer GUARDED_BY(mu);
    void settle(const Status& s);
    void release();
  };

  // pool_loop_journal.cpp: the task journal (the store's, when it has one; docs/journal.md).
  // Before the loop runs: the core's TaskJournalHooks.
  void install_journal();
  // submit(), with a journal: queues one accept() of `tasks` (all or none); the answer
  // settles each task's ack, then `batch` (may be null).
  void journal_accept(const std::vector<TaskPtr>& tasks, std::shared_ptr<BatchAck> batch);
  // After submit() posted the task: the ack may now reach on_accepted (and a refusal cancel
  // the task), whichever of this and the journal's answer comes second.
  void release_ack(const TaskPtr& task);
  // A refused accept: cancels the task (its end reports `why`).
  void cancel_refused(const TaskPtr& task, const Status& why);
  // The journal committed the task's end (any thread): the loop ends it. Ends that arrive
  // while one message is on its way join it: one mailbox message per writer round, not per
  // task.
  void end_written(std::uint64_t task_id);
  // The same for several (one turn's ends), with one lock and at most one message.
  void ends_written(const std::vector<std::uint64_t>& task_ids);
  // Posts the message that takes ends_written_ to the core.
  void post_ends_written();
  // While run() turns: queues the turn's ends (turn_ends_) after its other records, the
  // last with the one callback that answers them all, and hands the turn's records over.
  void hand_over_turn();
  // After launch, with a journal: ids above the journal's highest, and this pool's
  // unfinished tasks queued again (PoolCore::recover).
  Status recover_journal();
  // Records through the turn's batch while run() turns (journal_batching_), else at once.
  template <typename Add>
  void journal_record(Add add) {
    if (journal_batching_) return add(journal_records_);
    TaskJournal::Records now;
    add(now);
    journal_->hand_over(now);
  }
  TaskJournal* journal_ = nullptr;  // set at construction, immutable after
  // The loop thread's, while run() turns: the records of this turn, handed over at its end.
  TaskJournal::Records journal_records_;
  // The tasks this turn ended whose finish() is queued at the turn's end (hand_over_turn):
  // one callback for the turn's ends instead of a std::function each.
  std::vector<TaskPtr> turn_ends_;
  bool journal_batching_ = false;
  bool in_end_hook_ = false;  // the thread in the `end` hook: within its finish()
  bool end_inline_ = false;   // the same: the journal answered within finish() itself
  Mutex ends_mu_;
  std::vector<std::uint64_t> ends_written_ GUARDED_BY(ends_mu_);  // end_written() ids not taken

  PoolOptions opts_;
  const PoolOptions as_started_;  // opts_ as given at start: reconfigure() checks against it
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<Spawner> spawner_;
  // What plan_launch() was given: probed once in launch(), before the loop thread starts,
  // immutable after (reconfigure() reads it on the caller's thread).
  HostFacts host_;
  std::atomic<std::size_t> admitted_{0};
  // Submit-side limits, read by any thread, changed by reconfigure().
  std::atomic<std::uint64_t> max_payload_{0};
  std::atomic<std::size_t> queue_capacity_{0};
  std::atomic<std::int64_t> max_timeout_ms_{0};
  std::atomic<std::size_t> max_per_tenant_{0};
  std::atomic<std::size_t> max_tenants_{0};
  TenantCounts tenant_counts_;  // the core counts there too (PoolCore::set_tenant_counts)
  BusyClock busy_;              // the loop thread's (busy_for_ns)
  LoopMailbox mailbox_;
  std::optional<Poller> poller_;
  std::unique_ptr<WorkerLinks> links_;  // before core_: the core commands it
  std::unique_ptr<PoolCore> core_;
  // The types it serves, interned: set once before it takes tasks (at the first worker's Ready
  // message, or at construction without workers).
  TaskTypes task_types_;
  std::string isolation_;

  // The direct hand-off (pool_loop_hand_off.cpp; docs/architecture.md, "The loop's claim").
  // The loop thread holds claim_ but while idle; whoever holds it runs the core and the links.
  LoopClaim claim_;
  // While the loop is idle: by when it looks at the pool on its own. 0 while it spins (it
  // plans its sleep again, with the core's deadlines, once the spin ends); parked, the end of
  // its epoll_wait timeout.
  std::int64_t idle_look_ns_ GUARDED_BY(claim_) = 0;
  // A hand-off ran while the loop was idle: publish the stats it changed before sleeping.
  bool handed_off_ GUARDED_BY(claim_) = false;
  std::vector<ipc::RingConsumer*> spin_rings_;  // loop thread: what spin_for_work() reads
  std::atomic<std::uint64_t> hand_offs_{0};
  // The return half: the waiter's spin on its worker's ring under the claim, and how long a
  // waiter's read keeps the loop parked instead of spinning.
  static constexpr std::int64_t kDirectWaitNs = 50'000;
  static constexpr std::int64_t kDirectQuietNs = 1'000'000;
  std::atomic<std::int64_t> direct_wanted_ns_{INT64_MIN / 2};  // ask_to_park()'s last time
  // The parked loop woke (epoll_wait returned) and waits for the claim: a waiter hands back.
  std::atomic<bool> waking_{false};
  std::atomic<std::uint64_t> direct_ends_{0};
  // No journal: a task must be journaled before it runs, and the journal's turn batching is
  // the loop's (set at construction, immutable after).
  bool hand_off_allowed_ = false;

  // Loop-thread state.
  bool first_ready_seen_ = false;
  std::uint32_t spin_us_ = 0;
  std::uint64_t pending_max_payload_ = 0;  // 0: none (release_pending_max_payload)

  std::atomic<std::uint64_t> next_task_id_{1};
  std::atomic<bool> draining_{false};
  // failed_ is set after failure_ is written; both through set_failure(), failure_ under
  // failure_mu_ (read by submit() and reconfigure() on other threads).
  void set_failure(std::string why);
  std::string failure() const;
  std::atomic<bool> failed_{false};
  mutable Mutex failure_mu_;
  std::string failure_ GUARDED_BY(failure_mu_);

  std::thread thread_;
};

}  // namespace sandpool::core
