// The pool's decision logic, without I/O: the queue, dispatch, attempts, retries, timeouts,
// cancellation, worker replacement and scaling. The event loop (pool_loop.hpp) feeds it
// events and carries out its commands through WorkerControl, so unit tests drive it with
// a fake WorkerControl and a hand-moved clock, without a single process.
//
// Thread-safety: none; the loop thread owns it. Times are CLOCK_MONOTONIC nanoseconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <sandpool/ipc/diagnostics.hpp>
#include <sandpool/ipc/messages.hpp>
#include <sandpool/pool.hpp>
#include <sandpool/pool_metrics.hpp>

#include "core/dispatcher.hpp"
#include "core/finished_tasks.hpp"
#include "core/task_queue.hpp"
#include "core/task_record.hpp"
#include "core/worker_state.hpp"
#include "supervision/exit_classifier.hpp"
#include "supervision/restart_intensity.hpp"

namespace sandpool::core {

// What the core asks of the outside world. Every call is a command; its consequences come
// back as events (on_ready, on_result, on_exit).
class WorkerControl {
 public:
  virtual ~WorkerControl() = default;
  // Starts a worker; returns its id. on_ready or on_exit follows for it.
  virtual WorkerId spawn() = 0;
  // Puts a task into the worker's ring.
  virtual void send_task(WorkerId w, const TaskRecord& task, std::uint32_t attempt,
                         std::int64_t deadline_ns) = 0;
  // Puts a Cancel into the worker's ring: a task it has not started is dropped (the worker
  // answers kCancelled); one it runs already is unaffected.
  virtual void send_cancel(WorkerId w, std::uint64_t task_id) = 0;
  // Raises the cancel flag the running handler sees through cancelled(), for the task at the
  // front of the worker's ring. One flag per worker: only the front's cancel is ever raised.
  virtual void raise_cancel_flag(WorkerId w, std::uint64_t task_id) = 0;
  // Asks the worker to finish its ring and exit.
  virtual void send_stop(WorkerId w) = 0;
  // SIGKILL. on_exit follows.
  virtual void kill(WorkerId w) = 0;
  // The task id the worker says is inside handle() (untrusted; 0 when idle). Only shown to
  // operators (`running`) and used to decide whether the worker must be beating: which task a
  // death or a deadline is charged to never depends on it.
  virtual std::uint64_t started_task(WorkerId w) = 0;
  virtual std::int32_t pid(WorkerId w) = 0;
  // The worker's last heartbeat, CLOCK_MONOTONIC ms (untrusted: it only protects itself).
  virtual std::int64_t heartbeat_ms(WorkerId w) = 0;
  // Resident set size in bytes; 0 when unknown.
  virtual std::uint64_t rss_bytes(WorkerId w) = 0;
  // CPU time the worker has used so far, ns; -1 when unknown.
  virtual std::int64_t cpu_ns(WorkerId w) = 0;
  // Asks each of the worker's threads where it is (ipc/diagnostics.hpp). Returns false iff
  // it cannot be asked (no process). Never waits for the answer.
  virtual bool request_backtrace(WorkerId w) = 0;
  // The worker's answer: bounded, printable text; with kComplete only once every thread
  // asked has answered, with kWhatArrived whatever did. nullopt while there is none.
  virtual std::optional<std::string> backtrace(WorkerId w, ipc::BacktraceRead read) = 0;
};

class PoolCore {
 public:
  // `admitted` counts the tasks waiting for a worker (queued or in an affinity backlog):
  // the Pool increments it at submit, to refuse past queue_capacity; the core keeps it equal
  // to the tasks it holds waiting (a task going back to the queue counts again).
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

  void start(std::int64_t now);
  void submit(TaskPtr task, std::int64_t now);
  // Returns false iff the task has ended (or is ending) already.
  bool cancel(const TaskPtr& task, std::int64_t now);
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
  bool rolling_restart() const { return rolling_restart_; }
  // Dead-letters every open task with `reason` (a shutdown past its timeout): queued and
  // retry-waiting ones at once, and those in the workers' rings, whose workers are killed;
  // the running one gets its attempt ended `lost` with `why`. Returns how many.
  std::size_t abandon_all(DeadReason reason, const std::string& why, std::int64_t now);
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
  // Deadlines (timeouts, cancel grace, init and stop timeouts), due retries and respawns.
  void on_tick(std::int64_t now);
  // Marks the tasks the workers report as started `running` (for display only), and takes
  // the CPU base of a new front task when cpu_time is set.
  void observe_running();
  // Kills the workers whose backtrace has arrived or whose backtrace_grace has passed.
  // Cheap when no backtrace is awaited; the loop calls it every iteration.
  void observe_backtraces(std::int64_t now);

  // The earliest time on_tick has something to do (INT64_MAX: nothing).
  std::int64_t next_deadline() const;
  bool idle() const;      // nothing queued, in flight, waiting for a retry or for its letter
  bool finished() const;  // closed, every worker gone, nothing left but letters being written
  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }
  std::uint32_t init_failures() const { return init_failures_; }
  std::size_t ready_workers() const;
  bool has_in_flight() const { return in_flight_total_ > 0; }
  std::size_t letters_pending() const { return letters_pending_.size(); }

  PoolStats stats() const;
  // Counters, workers by state, worker RSS and latency histograms (pool_core_metrics.cpp).
  PoolMetrics metrics() const;
  std::vector<WorkerInfo> workers(std::int64_t now) const;
  const std::deque<TaskResult>& dead_letters() const { return dead_letters_; }
  // Returns the record of an open task, or of an ended one still kept (task_records_*);
  // null when unknown. O(tasks held): for operators, not hot paths.
  TaskPtr find_task(std::uint64_t id) const;

 private:
  struct RetryEntry {
    std::int64_t due_ns;
    TaskPtr task;
    bool operator>(const RetryEntry& o) const { return due_ns > o.due_ns; }
  };
  // A min-heap on due time whose entries can also be walked (find_task).
  struct RetryHeap : std::priority_queue<RetryEntry, std::vector<RetryEntry>, std::greater<>> {
    const std::vector<RetryEntry>& entries() const { return c; }
  };

  // ---- tasks (pool_core.cpp, pool_core_tasks.cpp) ----
  void dispatch(std::int64_t now);
  // dispatch(), then, when closing, stops every worker that has nothing left to do.
  void settle(std::int64_t now);
  void admit(TaskRecord& t);
  void release_admission(TaskRecord& t);
  // The dispatcher's choice among candidates_ for `t`, leaving out the workers whose region
  // is too small for its payload.
  Choice choose_for(const TaskRecord& t);
  void assign(Worker& w, TaskPtr task, std::int64_t now);
  // Where every task that waits for a worker again goes (a retry come due, a dead worker's
  // unstarted ring, a backlog given up): back into the queue (front: at the head of its
  // level), or, in a failed pool that will never run it, dead-lettered crash_loop.
  void to_queue(TaskPtr task, bool front, std::int64_t now);
  // Ends the current attempt of a task and decides: retry, dead-letter or cancel.
  void end_attempt(const InFlight& f, Outcome outcome, std::string error, std::int32_t pid,
                   std::int64_t now, std::string backtrace = {});
  // Ends a task: completed and cancelled at once; dead_lettered through the sink, ending
  // once the letter is written.
  void finish(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
              std::string error, CancelReason cancel = CancelReason::kNone);
  void complete(const TaskPtr& task, TaskState state, DeadReason reason);
  // Takes every task that waits outside a ring: queued, waiting to retry, in backlogs.
  std::deque<TaskPtr> take_waiting();
  // Dead-letters what take_waiting() returns, with `reason` and `why`; returns how many.
  std::size_t dead_letter_waiting(DeadReason reason, const std::string& why);
  std::int64_t retry_delay_ns(const TaskRecord& t);
  // The ring entry of an open attempt of `t` (not ended), and its worker; null when none.
  std::pair<Worker*, InFlight*> find_in_ring(const TaskPtr& t);

  // ---- workers (pool_core_workers.cpp) ----
  void spawn_worker(std::int64_t now);
  // The lowest slot no starting or ready worker holds.
  std::uint32_t free_slot() const;
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
  void drain_worker(Worker& w, std::int64_t now);
  // A draining worker (or, when closing, a ready one with nothing left) whose ring is empty
  // is sent Stop and waits stop_timeout for its exit.
  void maybe_stop(Worker& w, std::int64_t now);
  // The ring's front changed (a result, a dispatch to an empty ring): its cancel flag and
  // CPU base follow the new front.
  void front_changed(Worker& w, std::int64_t now);
  void enter_failed(std::string why);
  void recycle(Worker& w, const std::string& why, std::int64_t now);
  // Recycles `w` if it has served recycle_max_tasks (a reconfigure may lower the limit under
  // a worker that is idle, which no result would then recycle).
  void recycle_if_due(Worker& w, std::int64_t now);
  void advance_rolling_restart(std::int64_t now);
  void adjust_worker_count(std::int64_t now);
  std::size_t live_workers() const;  // starting or ready
  Worker* find(WorkerId w);
  // Settles the ring of a worker that exited (death_charge.hpp decides who pays); returns
  // the id of the task charged, 0 when none.
  std::uint64_t settle_dead_ring(Worker& w, const supervision::Classified& c, std::int32_t pid,
                                 std::int64_t now);
  // Counts an exit in the restart intensity (crash_loop entry, backoff).
  void note_restart(std::int64_t now);

  // ---- health (pool_core_health.cpp) ----
  void check_deadlines(std::int64_t now);
  // Returns true iff the worker was killed for a deadline of its ring.
  bool check_ring_deadlines(Worker& w, std::int64_t now, std::int64_t* next);
  // Heartbeats, per-task CPU, RSS, queue TTL, leaving crash_loop: once per heartbeat interval.
  void sweep(std::int64_t now);
  void expire_queued(std::int64_t now);

  void emit(PoolEvent e) const {
    if (opts_.on_event) opts_.on_event(e);
  }
  // Metrics recording (pool_core_metrics.cpp): a task's first dispatch, an attempt's end
  // (history entry), a task's terminal state at clock_ns_.
  void note_dispatch(TaskRecord& t, std::int64_t now);
  void note_attempt_end(const InFlight& f, Outcome outcome, std::int64_t now);
  void note_terminal(const TaskRecord& t, TaskState state, DeadReason reason);
  void log(int level, const std::string& text) const {
    if (log_) log_(level, text);
  }

  PoolOptions opts_;
  WorkerControl& ctl_;
  std::atomic<std::size_t>& admitted_;
  Dispatcher dispatcher_;
  std::mt19937_64 rng_;
  supervision::RestartIntensity intensity_;

  TaskQueue queue_;
  std::size_t open_tasks_ = 0;  // submitted and not yet terminal (letters pending included)
  RetryHeap retries_;
  FinishedTasks finished_;
  std::map<WorkerId, Worker> workers_;      // ascending id: round-robin order
  std::vector<Candidate> candidates_;       // scratch for dispatch
  std::vector<Worker*> candidate_workers_;  // parallel to candidates_
  std::deque<TaskResult> dead_letters_;
  // Tasks decided dead-lettered whose letter the sink is writing, by id.
  std::map<std::uint64_t, std::pair<TaskPtr, DeadReason>> letters_pending_;

  std::uint32_t target_workers_ = 0;
  std::uint64_t generation_ = 0;            // bumped when the launch spec changes
  std::vector<std::uint64_t> slot_starts_;  // workers started per slot so far
  std::uint32_t init_failures_ = 0;         // consecutive
  std::int64_t respawn_due_ns_ = 0;         // 0: none pending
  std::size_t in_flight_total_ = 0;
  std::size_t backlogged_ = 0;  // tasks in the workers' affinity backlogs
  std::int64_t next_check_ns_ = INT64_MAX;
  bool closing_ = false;
  bool failed_ = false;
  std::string failure_;
  PoolStats stats_;
  std::function<void(int, const std::string&)> log_;
  std::function<bool(const TaskPtr&)> dead_letter_sink_;
  bool rolling_restart_ = false;
  std::int64_t next_sweep_ns_ = 0;
  std::size_t ttl_tasks_ = 0;  // open tasks that carry a queue TTL
  // The latest `now` an entry point was given (each one taking `now` sets it first):
  // finish() records end-to-end latency and stamps finished_ with it.
  std::int64_t clock_ns_ = 0;
  PoolMetrics recorded_;  // attempts, dead letters by reason, histograms
  // Workers whose Killing state awaits a backtrace.
  std::size_t backtraces_awaited_ = 0;
};

}  // namespace sandpool::core
