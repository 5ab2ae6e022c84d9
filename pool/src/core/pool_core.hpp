// The pool's decision logic, without I/O: the queue, dispatch, attempts, retries, timeouts,
// cancellation, worker replacement and scaling. The event loop (pool_loop.hpp) feeds it
// events and carries out its commands through WorkerControl (worker_control.hpp), so unit
// tests drive it with a fake WorkerControl and a hand-moved clock, without a single process.
// PoolCore routes each event to the parts that decide, each owning its state: Autoscaler
// (a step of the worker target), TaskLedger (the books on tasks, open to terminal),
// WorkerSet (the workers, target, slots, generations, rolling restart, restart intensity),
// Dispatcher, TaskQueue and FlowGates; it carries out their answers. Its own members are
// split by concern, one source file each (pool_core.cpp lists them): tasks in and out,
// worker lifecycle and deaths, health, autoscaling, metrics.
//
// Thread-safety: none; the holder of the loop's claim owns it: the loop thread, or a
// submitting thread in hand_off() (docs/architecture.md, "The loop's claim"). Times are
// CLOCK_MONOTONIC nanoseconds; it
// reads no clock itself (WorkerControl::wall_ms() stamps what operators read).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <sandpool/ipc/messages.hpp>
#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_metrics.hpp>

#include "core/autoscaler.hpp"
#include "core/dispatcher.hpp"
#include "core/flow_gates.hpp"
#include "core/task_ledger.hpp"
#include "core/task_queue.hpp"
#include "core/task_record.hpp"
#include "core/tenant_counts.hpp"
#include "core/worker_control.hpp"
#include "core/worker_set.hpp"
#include "core/worker_state.hpp"
#include "supervision/exit_classifier.hpp"

namespace sandpool::core {

// Where a pool that journals its tasks writes what happens to them (pool_loop_journal.cpp;
// docs/journal.md). Each call only queues a write: none waits on the disk.
struct TaskJournalHooks {
  // An attempt started: its worker's started word named it at the front of its ring
  // (number, worker pid, dispatch wall ms). A task only queued in a ring gets none.
  std::function<void(const TaskRecord&, const Attempt& start)> started;
  // A task whose start was journaled goes back to waiting without an attempt (its worker
  // died charging another task, or a shutdown that keeps it stopped it): the start is undone.
  std::function<void(const TaskRecord&)> requeued;
  // An attempt ended and the task waits to retry until retry_due_ms (wall clock).
  std::function<void(const TaskRecord&, const Attempt& ended, std::int64_t retry_due_ms)> retrying;
  // The task ends completed or cancelled (its account is final). Returns true iff
  // on_end_written(id) follows once the end is written: until then the task is not terminal.
  std::function<bool(const TaskPtr&)> end;
};

// A task read back from the journal at start (PoolCore::recover; docs/journal.md).
struct RecoveredTask {
  TaskPtr task;                    // its history in account and attempts_ended
  std::optional<Attempt> running;  // the journaled start of an attempt that never ended
  bool retry_wait = false;         // waits retry_in_ns from now (at once when <= 0)
  std::int64_t retry_in_ns = 0;
  // Not empty: the pool cannot run it (its type is no longer served), so it is dead-lettered
  // `permanent` with this error.
  std::string refused;
};

class PoolCore {
 public:
  // `admitted` counts the tasks waiting for a worker (queued or in an affinity backlog):
  // the Pool increments it at submit, to refuse past queue_capacity; the core keeps it equal
  // to the tasks it holds waiting (a task going back to the queue counts again) at the end of
  // each of its steps (a dispatch takes its tasks out in one write).
  PoolCore(const PoolOptions& options, WorkerControl& control, std::atomic<std::size_t>& admitted);

  // Where the core reports what an operator should see (worker killed for missed
  // heartbeats, crash_loop entered/left, recycling). Level: 1 info, 2 warn, 3 error.
  void set_log(std::function<void(int level, const std::string& text)> log) {
    log_ = std::move(log);
  }
  // Where a task that is to end dead-lettered goes, with its final account. Returns true iff
  // the sink writes the letter durably and on_letter_written(id) follows once it is written:
  // until then the task is not terminal (its ticket keeps waiting, it is counted as a letter
  // pending). False (or no sink): the task ends at once.
  void set_dead_letter_sink(std::function<bool(const TaskPtr&)> sink) {
    dead_letter_sink_ = std::move(sink);
  }

  // The pool's per-tenant waiting counts, which the core keeps for the tasks counted there
  // (TaskRecord::tenant_counted) as it keeps `admitted`; null: none (no task is counted).
  void set_tenant_counts(TenantCounts* counts) { tenant_counts_ = counts; }

  // Journal writes (see TaskJournalHooks); none by default.
  void set_journal(TaskJournalHooks hooks) { journal_ = std::move(hooks); }

  void start(std::int64_t now);
  void submit(TaskPtr task, std::int64_t now);
  // The direct hand-off (pool_core_hand_off.cpp; docs/architecture.md, "The loop's claim"):
  // submit() of `task` by a submitting thread that holds the loop's claim, taken only when the
  // loop's own submit would dispatch the task at once to a ready worker with room and call
  // nothing outside the core and its WorkerControl (no callback, no end, no spawn): nothing
  // queued or held, no gate, no dispatch function, no autoscaler, not scheduled, not closing,
  // failed or in crash_loop. Returns true iff it took the task (then as submit() would);
  // false, changing nothing: the caller posts it to the loop.
  bool hand_off(const TaskPtr& task, std::int64_t now);
  // The return half (pool_core_hand_off.cpp): the ready worker whose ring holds an open attempt
  // of `task`, when a waiter that holds the loop's claim may read that worker's results and
  // end what they end on its own thread: nothing the results can lead to calls out of the
  // core (no task on that ring has on_done or on_progress; no on_event listener, dispatch
  // function or autoscaler; the worker is not due for recycling, which would spawn; the pool
  // is not closing, failed or in crash_loop). 0 otherwise.
  WorkerId direct_read_worker(const TaskPtr& task) const;
  // The loop's batches (issue 37): between begin_batch() and end_batch(now) the entry points
  // only note that the queue wants dispatching (and the closing pool settling, the autoscaler
  // a look); end_batch() does it once, after the batch's submits or results. So a pass that
  // takes in k submits or k results looks at the workers once, not k times: with 128
  // workers the per-event look was most of the loop's CPU. Decisions are the same ones,
  // made at the batch's `now`; nothing outside the core sees the difference before the
  // loop's flush.
  void begin_batch() { batching_ = true; }
  void end_batch(std::int64_t now);
  // A task read back from the journal at start: `running` becomes an attempt ended `lost`
  // ("poold restarted") and the task follows its retry policy; a retry_wait one waits;
  // otherwise it is queued. A refused one is dead-lettered `permanent` (after its lost
  // attempt, if it was running).
  void recover(RecoveredTask r, std::int64_t now);
  // Returns false iff the task has ended (or is ending) already.
  bool cancel(const TaskPtr& task, std::int64_t now);
  // Sets the worker target (within worker_bounds when autoscaling: the autoscaler goes on
  // from there one cooldown later); a shrink drains idle workers first.
  void scale(std::uint32_t workers, std::int64_t now);
  void set_strategy(DispatchStrategy s) { dispatcher_.set_strategy(s); }
  // Replaces every worker: all at once (each drained while its replacement starts), or
  // rolling: one at a time, the next once no replacement is still starting. A rolling
  // restart pauses while replacements fail their init.
  void restart_workers(bool rolling, std::int64_t now);
  // Takes `next`'s worker spec and live values (whole) and applies them: strategy, record
  // and dead-letter bounds, limits, worker count. replace_workers: the launch spec changed,
  // so every worker started before this call is replaced, one at a time (rolling restart).
  void reconfigure(const PoolOptions& next, bool replace_workers, std::int64_t now);
  bool rolling_restart() const { return workers_.rolling_restart(); }
  // Dead-letters every open task with `reason` (a shutdown past its timeout): queued and
  // retry-waiting ones at once, and those in the workers' rings, whose workers are killed;
  // the running one gets its attempt ended `lost` with `why`. Returns how many.
  std::size_t abandon_all(DeadReason reason, const std::string& why, std::int64_t now);
  // Ends every open task `cancelled` (cancel reason shutdown, error `why`) without writing
  // its end to the journal, where it stays unfinished for the next start; kills the workers
  // that hold some. Those in a ring are put back to waiting there (TaskJournalHooks::
  // requeued): stopped by the shutdown, they use up no attempt. Returns how many.
  std::size_t release_all(const std::string& why, std::int64_t now);
  // Stops accepting work (the Pool refuses submits); finishes what was accepted, then stops
  // every worker.
  void close(std::int64_t now);

  // `isolation`: the layers the worker reports in effect (ReadyMsg), for workers().
  // Returns false iff the worker was not starting (a repeated Ready breaks the protocol).
  bool on_ready(WorkerId w, std::int64_t now, std::string isolation = {});
  // Returns false iff the message breaks the protocol (the id is not in flight on w); the
  // caller then reports on_protocol_error.
  bool on_result(WorkerId w, ipc::ResultMsg& msg, std::int64_t now);
  bool on_progress(WorkerId w, const ipc::ProgressMsg& msg);
  // A worker logged an error-level line: kept as the explanation of an init failure.
  void on_worker_error(WorkerId w, std::string text);
  void on_protocol_error(WorkerId w, std::string what);
  // Lines of a worker's output or log the loop dropped over the pool's output limit.
  void on_output_dropped(std::uint64_t lines) { stats_.output_dropped += lines; }
  void on_exit(WorkerId w, const supervision::ExitReport& report, std::int64_t now);
  // The dead letter of task `id` is written (see set_dead_letter_sink): the task ends.
  void on_letter_written(std::uint64_t id, std::int64_t now);
  // The journaled end of task `id` is written (TaskJournalHooks::end): the task ends.
  void on_end_written(std::uint64_t id, std::int64_t now);
  // Deadlines (timeouts, cancel grace, init and stop timeouts), due retries and respawns.
  void on_tick(std::int64_t now);
  // Marks the tasks the workers report as started `running`, journals the start of a front
  // task its worker reports started (TaskJournalHooks::started, once per attempt), and takes
  // the CPU base of a new front task when cpu_time is set.
  void observe_running();
  // Kills the workers whose backtrace has arrived or whose backtrace_grace has passed.
  // Cheap when no backtrace is awaited; the loop calls it every iteration.
  void observe_backtraces(std::int64_t now);

  // The earliest time on_tick has something to do (INT64_MAX: nothing).
  std::int64_t next_deadline() const;
  bool idle() const;  // nothing queued, in flight, waiting for a retry or for its letter
  // The pool's own end: closed, every worker gone, nothing left but letters and ends being
  // written (the loop may stop).
  bool wound_down() const;
  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }
  std::uint32_t init_failures() const { return workers_.init_failures(); }
  std::size_t ready_workers() const;
  bool has_in_flight() const { return in_flight_total_ > 0; }
  std::size_t letters_pending() const { return ledger_.letters_pending(); }

  PoolStats stats() const;
  // Counters, workers by state, worker RSS and latency histograms (pool_core_metrics.cpp).
  PoolMetrics metrics() const;
  std::vector<WorkerInfo> workers(std::int64_t now) const;
  const std::deque<TaskResult>& dead_letters() const { return ledger_.dead_letters(); }
  // Returns the record of an open task, or of an ended one still kept (task_records_*);
  // null when unknown. O(tasks held): for operators, not hot paths.
  TaskPtr find_task(std::uint64_t id) const;
  // Every task this pool holds (open, or ended and still kept) for which `keep` is true:
  // the open ones, then the ended ones newest first, at most `limit`. O(tasks held).
  std::vector<TaskPtr> list_tasks(const std::function<bool(const TaskRecord&)>& keep,
                                  std::size_t limit) const;

 private:
  struct RetryEntry {
    std::int64_t due_ns;
    TaskPtr task;
    bool operator>(const RetryEntry& o) const { return due_ns > o.due_ns; }
  };
  // A min-heap on due time whose entries can also be walked (find_task).
  struct RetryHeap : std::priority_queue<RetryEntry, std::vector<RetryEntry>, std::greater<>> {
    const std::vector<RetryEntry>& entries() const { return c; }
    // Removes `t`'s entry; returns false iff it has none. O(n).
    bool remove(const TaskPtr& t) {
      auto it = std::find_if(c.begin(), c.end(), [&](const RetryEntry& e) { return e.task == t; });
      if (it == c.end()) return false;
      c.erase(it);
      std::make_heap(c.begin(), c.end(), comp);
      return true;
    }
  };

  // ---- tasks in (pool_core_dispatch.cpp) ----
  // What submit() and recover() set on a task they take in: attempts, timeout, TTL, counts.
  void take_in(TaskRecord& t, std::int64_t now);
  void admit(TaskRecord& t);
  // Takes the task out of the admission count, at once, or (deferred) by adding it to
  // *deferred, which the caller takes out of the count itself before its step ends.
  void release_admission(TaskRecord& t, std::size_t* deferred = nullptr);
  // A task whose not_before is ahead: `scheduled` until due_ns, still admitted (it counts in
  // queue_capacity); on_tick queues it once due.
  void schedule(TaskPtr task);
  // Queues the scheduled tasks that are due.
  void release_scheduled(std::int64_t now);
  // Returns the tasks the flow gates let through now to the front of their lanes; returns
  // false iff there were none.
  bool release_gates(std::int64_t now);
  // Dispatched ring entries by task type (the flow gates' concurrency caps).
  std::map<std::string, std::uint32_t> ring_entries_by_type() const;
  // A task entered the queue at `now`: with aging on, on_tick looks again an interval later.
  void note_aging(std::int64_t now) {
    if (opts_.aging_interval.count() > 0) {
      next_aging_ns_ = std::min(next_aging_ns_, now + opts_.aging_interval.count() * 1000000);
    }
  }
  // Where every task that waits for a worker again goes (a retry come due, a dead worker's
  // unstarted ring, a backlog given up): back into the queue (front: at the head of its
  // level), or, in a failed pool that will never run it, dead-lettered crash_loop.
  void to_queue(TaskPtr task, bool front, std::int64_t now);
  void dispatch(std::int64_t now);
  // dispatch()'s part for the queue: its head to the workers while one has room.
  void dispatch_queue(std::int64_t now);
  // The dispatcher's choice (or the dispatch function's) among candidates_ for `t`, leaving
  // out the workers whose region is too small for its payload.
  Choice choose_for(const TaskRecord& t, std::int64_t now);
  // PoolOptions::dispatch_function's choice among `workers` (candidate_workers_ through
  // `index`, or all when empty), measured; the built-in strategy's when it throws or names
  // a worker that cannot take the task.
  Choice choose_custom(std::span<const Candidate> workers, std::span<const int> index,
                       const TaskRecord& t, std::int64_t now);
  // One log line per kind of dispatch function trouble per 10 s, with how many since.
  enum class FnTrouble : std::uint8_t { kThrew, kInvalid, kSlow };
  void note_fn_trouble(FnTrouble kind, const std::string& what, std::int64_t now);
  // Whether the sweep samples each worker's RSS (least-rss, a dispatch function, recycling
  // by RSS).
  bool samples_rss() const {
    return dispatcher_.strategy() == DispatchStrategy::kLeastRss || opts_.dispatch_function ||
           opts_.recycle_max_rss != 0;
  }
  // `released`: see release_admission (null: at once).
  void assign(Worker& w, TaskPtr task, std::int64_t now, std::size_t* released = nullptr);
  // The ring entry of an open attempt of `t` (not ended), and its worker; null when none.
  std::pair<Worker*, InFlight*> find_in_ring(const TaskPtr& t);

  // ---- tasks out (pool_core_attempts.cpp) ----
  // Ends the current attempt of a task and decides: retry, dead-letter or cancel.
  void end_attempt(const InFlight& f, Outcome outcome, std::string error, std::int32_t pid,
                   std::int64_t now, std::string backtrace = {});
  std::int64_t retry_delay_ns(const TaskRecord& t);
  // Decides a task's end (its account's state, reason, result, error) and has it made
  // terminal: completed and cancelled at once, or once the journal wrote the end;
  // dead-lettered through the sink, once the letter is written. A task decided already is
  // left alone.
  // `ended`: an attempt to append to its history first, under the same lock (a result's).
  void end_task(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
                std::string error, CancelReason cancel = CancelReason::kNone,
                Attempt* ended = nullptr);
  // Makes a decided task terminal in `state`: the ledger's books, the counters and metrics,
  // then its ticket, kTaskEnded and on_done see the end. Once per task.
  void make_terminal(const TaskPtr& task, TaskState state, DeadReason reason);
  // Takes every task that waits outside a ring: queued, waiting to retry, in backlogs.
  std::deque<TaskPtr> take_waiting();
  // Dead-letters what take_waiting() returns, with `reason` and `why`; returns how many.
  std::size_t dead_letter_waiting(DeadReason reason, const std::string& why);

  // ---- worker lifecycle (pool_core_workers.cpp) ----
  void spawn_worker(std::int64_t now);
  Worker* find(WorkerId w) { return workers_.find(w); }
  // The ring's front changed (a result, a dispatch to an empty ring): its cancel flag and
  // CPU base follow the new front.
  void front_changed(Worker& w, std::int64_t now);
  void drain_worker(Worker& w, std::int64_t now);
  // A draining worker (or, when closing, a ready one with nothing left) whose ring is empty
  // is sent Stop and waits stop_timeout for its exit.
  void maybe_stop(Worker& w, std::int64_t now);
  void recycle(Worker& w, const std::string& why, std::int64_t now);
  // Recycles `w` if it has served recycle_max_tasks (a reconfigure may lower the limit under
  // a worker that is idle, which no result would then recycle).
  void recycle_if_due(Worker& w, std::int64_t now);
  void advance_rolling_restart(std::int64_t now);
  void adjust_worker_count(std::int64_t now);
  // Sets the worker target and starts or drains workers to meet it.
  void set_target(std::uint32_t n, std::int64_t now);
  // Records a change of the target to `n` and why: the log line, the `scaled` event and
  // PoolStats::target_reason.
  void note_target(std::uint32_t n, std::string why);

  // ---- the autoscaler (pool_core_autoscale.cpp; its rules in autoscaler.hpp) ----
  // Asks the autoscaler for a step, applies it, and lets it plan its next look.
  void autoscale(std::int64_t now);
  // How long the task that has waited longest for a worker has waited (queued, or behind
  // another task in a ring); -1: none waits.
  std::int64_t longest_wait(std::int64_t now) const;
  // The ready workers' idle times, as the autoscaler reads them (in ready_scratch_).
  std::span<const ReadyWorkerIdle> ready_idleness();
  // A task started waiting for a worker: the autoscaler looks within a tick (at the next
  // on_tick when the target is 0; submit() looks at once, so the first task of an on-demand
  // pool starts its worker).
  void note_waiting(std::int64_t now) { autoscaler_.note_waiting(now, workers_.target()); }

  // ---- worker deaths (pool_core_exits.cpp) ----
  // Kills the worker for `why` (SIGKILL now), charging `task_id` (0: the front, see
  // death_charge.hpp) with `outcome`/`error`. A worker being killed already is left alone.
  void kill_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                   std::uint64_t task_id, std::int64_t now);
  // kill_worker for a hung worker, after asking it for a backtrace: the kill itself happens
  // in observe_backtraces (answer seen or backtrace_grace over) or at once when disabled.
  void kill_hung_worker(Worker& w, KillReason why, Outcome outcome, std::string error,
                        std::uint64_t task_id, std::int64_t now);
  // Takes the worker's backtrace (or notes that none came), logs it once.
  void collect_backtrace(Worker& w, Killing& k);
  // Settles the ring of a worker that exited (death_charge.hpp decides who pays); returns
  // the id of the task charged, 0 when none.
  std::uint64_t settle_dead_ring(Worker& w, const supervision::Classified& c, std::int32_t pid,
                                 std::int64_t now);
  // Counts an exit in the restart intensity (crash_loop entry, backoff).
  void note_restart(std::int64_t now);
  void enter_failed(std::string why);

  // ---- health (pool_core_health.cpp) ----
  void check_deadlines(std::int64_t now);
  // Returns true iff the worker was killed for a deadline of its ring.
  bool check_ring_deadlines(Worker& w, std::int64_t now, std::int64_t* next);
  // Heartbeats, per-task CPU, RSS, queue TTL, leaving crash_loop: once per heartbeat interval.
  void sweep(std::int64_t now);
  void expire_queued(std::int64_t now);

  // ---- metrics (pool_core_metrics.cpp) ----
  // A task's first dispatch, an attempt's end (history entry), a task's terminal state at
  // clock_ns_.
  void note_dispatch(TaskRecord& t, std::int64_t now);
  void note_attempt_end(const InFlight& f, Outcome outcome, std::int64_t now);
  void note_terminal(const TaskRecord& t, TaskState state, DeadReason reason);

  // ---- both (pool_core.cpp) ----
  // dispatch(), then, when closing, stops every worker that has nothing left to do.
  void settle(std::int64_t now);
  void emit(PoolEvent e) const {
    if (opts_.on_event) opts_.on_event(e);
  }
  void log(int level, const std::string& text) const {
    if (log_) log_(level, text);
  }

  // ---- state ----
  PoolOptions opts_;
  WorkerControl& ctl_;
  std::atomic<std::size_t>& admitted_;

  // Tasks. An open task waits in queue_, in a worker's backlog, in a worker's ring (an
  // entry not ended), in retries_, or in the ledger for its letter or end to be written; the
  // ledger counts the open ones and keeps them once they ended.
  TaskLedger ledger_;
  Dispatcher dispatcher_;
  TaskQueue queue_;
  RetryHeap retries_;
  RetryHeap scheduled_;                     // tasks waiting for their not_before, by due time
  std::int64_t next_aging_ns_ = INT64_MAX;  // when a queued task is next due to age
  TenantCounts* tenant_counts_ = nullptr;
  FlowGates gates_;                        // rate limits and caps (FlowLimits)
  std::int64_t flow_wake_ns_ = INT64_MAX;  // the pool's bucket refills: dispatch again
  std::mt19937_64 rng_;                    // retry jitter
  // begin_batch() .. end_batch(): what the batch's entry points asked for.
  bool batching_ = false;
  bool batch_settle_ = false;
  bool batch_dispatch_ = false;
  bool batch_autoscale_ = false;
  std::vector<Candidate> candidates_;       // scratch for dispatch
  std::uint64_t candidates_frame_cap_ = 0;  // the smallest frame_cap among candidates_
  std::vector<Worker*> candidate_workers_;  // parallel to candidates_
  std::vector<WorkerView> views_;           // scratch for the dispatch function
  struct FnLogState {
    std::int64_t last_ns = INT64_MIN;  // the last line logged
    std::uint64_t since = 0;           // occurrences not logged since
  };
  std::array<FnLogState, 3> fn_log_{};  // by FnTrouble
  std::size_t in_flight_total_ = 0;     // ring entries, over every worker
  std::size_t backlogged_ = 0;          // tasks in the workers' affinity backlogs
  std::function<bool(const TaskPtr&)> dead_letter_sink_;
  TaskJournalHooks journal_;

  // Workers, each with its ring and backlog, and what is about the set (worker_set.hpp): the
  // target, slots, generations, the rolling restart, restart intensity, respawn backoff.
  WorkerSet workers_;
  bool failed_ = false;
  std::string failure_;

  // Autoscaling: the decisions, and the worker target's last reason (any change's).
  Autoscaler autoscaler_;
  std::vector<ReadyWorkerIdle> ready_scratch_;  // ready_idleness()'s answer
  std::string target_reason_ = "initial";

  // Health: when on_tick next has deadlines to check, and the next sweep.
  std::int64_t next_check_ns_ = INT64_MAX;
  std::int64_t next_sweep_ns_ = 0;

  // Both.
  bool closing_ = false;
  // The latest `now` an entry point was given (each one taking `now` sets it first):
  // make_terminal() records end-to-end latency and stamps the finished record with it.
  std::int64_t clock_ns_ = 0;
  PoolStats stats_;
  PoolMetrics recorded_;  // attempts, dead letters by reason, histograms
  std::function<void(int, const std::string&)> log_;
};

}  // namespace sandpool::core
