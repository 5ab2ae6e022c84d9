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
#include "supervision/exit_classifier.hpp"

namespace sandpool::core {

using WorkerId = std::uint64_t;

// Copies the fields Pool::reconfigure applies to a running pool from `from` into `to`;
// the pool's identity (name, task_types, worker_path, task_ids, store, logger, on_event,
// spawner, seed) stays `to`'s.
void copy_live_options(PoolOptions& to, const PoolOptions& from);

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
  // Asks the worker to drop a task it has not started, and raises its cancel flag for it.
  virtual void send_cancel(WorkerId w, std::uint64_t task_id) = 0;
  // Asks the worker to finish its ring and exit.
  virtual void send_stop(WorkerId w) = 0;
  // SIGKILL. on_exit follows.
  virtual void kill(WorkerId w) = 0;
  // The task id the worker says is inside handle() (untrusted; 0 when idle).
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
  // `admitted` counts tasks accepted but never dispatched; the Pool increments it at
  // submit (to refuse past capacity) and the core decrements it at first dispatch.
  PoolCore(const PoolOptions& options, WorkerControl& control, std::atomic<std::size_t>& admitted);

  // Where the core reports what an operator should see (worker killed for missed
  // heartbeats, crash_loop entered/left, recycling). Level: 1 info, 2 warn, 3 error.
  void set_log(std::function<void(int level, const std::string& text)> log) {
    log_ = std::move(log);
  }
  // Called for every task that ends dead-lettered, with its final account.
  void set_dead_letter_sink(std::function<void(const TaskRecord&)> sink) {
    dead_letter_sink_ = std::move(sink);
  }

  void start(std::int64_t now);
  void submit(TaskPtr task, std::int64_t now);
  // Returns false iff the task is already terminal.
  bool cancel(const TaskPtr& task, std::int64_t now);
  void scale(std::uint32_t workers, std::int64_t now);
  void set_strategy(DispatchStrategy s) { dispatcher_.set_strategy(s); }
  // Replaces every worker: all at once (each drained while its replacement starts), or
  // rolling: one at a time, the next once no replacement is still starting. A rolling
  // restart pauses while replacements fail their init.
  void restart_workers(bool rolling, std::int64_t now);
  // Takes `next`'s changeable fields (copy_live_options) and applies them: strategy, record
  // and dead-letter bounds, worker count. replace_workers: the launch spec changed, so every
  // worker started before this call is replaced, one at a time (rolling restart).
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
  void on_ready(WorkerId w, std::int64_t now, std::string isolation = {});
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
  // Timeouts, cancellation grace, init timeouts, due retries and respawns.
  void on_tick(std::int64_t now);
  // Marks tasks the workers report as started `running`.
  void observe_running();
  // Kills the workers whose backtrace has arrived or whose backtrace_grace has passed.
  // Cheap when no backtrace is awaited; the loop calls it every iteration.
  void observe_backtraces(std::int64_t now);

  // The earliest time on_tick has something to do (INT64_MAX: nothing).
  std::int64_t next_deadline() const;
  bool idle() const;      // nothing queued, in flight or waiting for a retry
  bool finished() const;  // closed and every worker gone
  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }
  std::uint32_t init_failures() const { return init_failures_; }
  std::size_t ready_workers() const;
  bool has_in_flight() const { return in_flight_total_ > 0; }

  PoolStats stats() const;
  // Counters, workers by state, worker RSS and latency histograms (pool_core_metrics.cpp).
  PoolMetrics metrics() const;
  std::vector<WorkerInfo> workers(std::int64_t now) const;
  const std::deque<TaskResult>& dead_letters() const { return dead_letters_; }
  // Returns the record of an open task, or of an ended one still kept (task_records_*);
  // null when unknown. O(tasks held): for operators, not hot paths.
  TaskPtr find_task(std::uint64_t id) const;

 private:
  enum class Phase { kStarting, kReady, kDraining, kStopping };
  struct InFlight {
    TaskPtr task;
    std::uint32_t attempt;
    std::int64_t dispatched_ns;
    std::int64_t started_wall_ms;
    std::int64_t deadline_ns;
    bool abandoned = false;  // given up on (timed out in the ring); its ack is dropped
  };
  struct Worker {
    WorkerId id;
    Phase phase = Phase::kStarting;
    std::int64_t spawned_ns = 0;
    std::uint64_t tasks_done = 0;
    std::deque<InFlight> in_flight;      // ring order
    std::deque<TaskPtr> backlog;         // affinity tasks waiting for this worker
    std::optional<Outcome> kill_reason;  // set when we killed it on purpose
    std::string kill_error;
    std::uint64_t kill_task = 0;
    std::uint64_t cancel_task = 0;  // a running task asked to stop
    std::int64_t cancel_deadline_ns = 0;
    std::string last_error;           // the worker's last error-level log line
    bool retiring = false;            // we stopped wanting it (scale down, close, recycle)
    std::int64_t ready_ns = 0;        // when it became ready
    std::string isolation;            // as the worker reported it when ready
    std::uint64_t cpu_task = 0;       // the running task whose CPU is being metered
    std::int64_t cpu_base_ns = -1;    // the worker's CPU time when cpu_task was first seen
    bool restart_pending = false;     // a rolling restart will replace it
    std::uint64_t generation = 0;     // the launch spec it was started with (reconfigure)
    std::uint32_t slot = 0;           // see WorkerInfo::slot
    std::uint64_t slot_restarts = 0;  // workers started in its slot before it

    // Hung-task diagnostics: a backtrace is awaited until backtrace_due_ns (0: none);
    // `backtrace` is the answer, for the attempt of kill_task.
    std::int64_t backtrace_due_ns = 0;
    std::string backtrace;
  };
  struct RetryEntry {
    std::int64_t due_ns;
    TaskPtr task;
    bool operator>(const RetryEntry& o) const { return due_ns > o.due_ns; }
  };
  // A min-heap on due time whose entries can also be walked (find_task).
  struct RetryHeap : std::priority_queue<RetryEntry, std::vector<RetryEntry>, std::greater<>> {
    const std::vector<RetryEntry>& entries() const { return c; }
  };

  void spawn_worker(std::int64_t now);
  // The lowest slot no starting or ready worker holds.
  std::uint32_t free_slot() const;
  void dispatch(std::int64_t now);
  // dispatch(), then, when closing, stops every worker that has nothing left to do.
  void settle(std::int64_t now);
  void release_admission(TaskRecord& t);
  void assign(Worker& w, TaskPtr task, std::int64_t now);
  void requeue(TaskPtr task);
  // Ends the current attempt of a task and decides: retry, dead-letter or cancel.
  void end_attempt(const InFlight& f, Outcome outcome, std::string error, std::int32_t pid,
                   std::int64_t now, std::string backtrace = {});
  void finish(const TaskPtr& task, TaskState state, DeadReason reason, std::string result,
              std::string error, CancelReason cancel = CancelReason::kNone);
  void kill_worker(Worker& w, Outcome why, std::string error, std::uint64_t task_id);
  // kill_worker for a hung worker, after asking it for a backtrace: the kill itself happens
  // in observe_backtraces (answer seen or backtrace_grace over) or at once when disabled.
  void kill_hung_worker(Worker& w, Outcome why, std::string error, std::uint64_t task_id,
                        std::int64_t now);
  // Takes the worker's backtrace (or notes that none came), logs it once.
  void collect_backtrace(Worker& w);
  void drain_worker(Worker& w);
  void maybe_stop(Worker& w);
  void enter_failed(std::string why);
  void check_deadlines(std::int64_t now);
  // Heartbeats, per-task CPU, RSS, queue TTL, leaving crash_loop: once per heartbeat interval.
  void sweep(std::int64_t now);
  void recycle(Worker& w, const std::string& why, std::int64_t now);
  void advance_rolling_restart(std::int64_t now);
  // Takes every task that waits outside a ring: queued, waiting to retry, in backlogs.
  std::deque<TaskPtr> take_waiting();
  void emit(PoolEvent e) const {
    if (opts_.on_event) opts_.on_event(e);
  }
  void note_restart(std::int64_t now);
  // Metrics recording (pool_core_metrics.cpp): a task's first dispatch, an attempt's end
  // (history entry), a task's terminal state at clock_ns_.
  void note_dispatch(const TaskRecord& t, std::int64_t now);
  void note_attempt_end(const InFlight& f, Outcome outcome, std::int64_t now);
  void note_terminal(const TaskRecord& t, TaskState state, DeadReason reason);
  void log(int level, const std::string& text) const {
    if (log_) log_(level, text);
  }
  void adjust_worker_count(std::int64_t now);
  std::size_t live_workers() const;  // not stopping or draining
  Worker* find(WorkerId w);
  std::int64_t retry_delay_ns(const TaskRecord& t);

  PoolOptions opts_;
  WorkerControl& ctl_;
  std::atomic<std::size_t>& admitted_;
  Dispatcher dispatcher_;
  std::mt19937_64 rng_;

  TaskQueue queue_;
  std::size_t open_tasks_ = 0;  // submitted and not yet terminal
  RetryHeap retries_;
  FinishedTasks finished_;
  std::map<WorkerId, Worker> workers_;      // ascending id: round-robin order
  std::vector<Candidate> candidates_;       // scratch for dispatch
  std::vector<Worker*> candidate_workers_;  // parallel to candidates_
  std::deque<TaskResult> dead_letters_;

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
  std::function<void(const TaskRecord&)> dead_letter_sink_;
  std::deque<std::int64_t> restart_times_;  // unexpected exits within restart_window
  bool crash_loop_ = false;
  bool rolling_restart_ = false;
  std::uint32_t crash_restarts_ = 0;  // restarts since entering crash_loop (the backoff)
  std::int64_t next_sweep_ns_ = 0;
  std::size_t ttl_tasks_ = 0;  // open tasks that carry a queue TTL
  // The latest `now` an entry point was given (each one taking `now` sets it first):
  // finish() records end-to-end latency and stamps finished_ with it.
  std::int64_t clock_ns_ = 0;
  PoolMetrics recorded_;  // attempts, dead letters by reason, histograms
  // Workers whose backtrace_due_ns is set.
  std::size_t backtraces_awaited_ = 0;
};

}  // namespace sandpool::core
