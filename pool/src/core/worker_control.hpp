// The seam between PoolCore's decisions and the processes they concern: WorkerControl is
// what the core asks of the outside world. The loop implements it with real workers, rings
// and epoll; the unit tests with a fake that records the commands and moves time by hand.
// Loop-thread only, like the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/ipc/diagnostics.hpp>

#include "core/task_record.hpp"
#include "core/worker_state.hpp"

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
  // The wall clock, ms since the epoch. The core reads no clock itself: its decisions run on
  // the CLOCK_MONOTONIC `now` each entry point is given, and this one stamps what an
  // operator reads (an attempt's started_ms and ended_ms) and places a task's not_before
  // on that clock once, when the task is taken in. The default reads the system
  // clock; a test's control moves it by hand.
  // CLOCK_MONOTONIC now, ns: only to measure how long a PoolOptions::dispatch_function call
  // took (its decisions never depend on it). A test's control may move it by hand.
  virtual std::int64_t elapsed_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  virtual std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // CLOCK_MONOTONIC ns as of a call after wall_ms(), never before the entry point's `now`:
  // a not_before is placed on the core's clock from the two. `now` was read earlier in the
  // loop's pass, and placed from it a task came due early by the pass's age so far. The
  // default returns `now` (a test's control moves its clocks by hand, together); the real
  // control (WorkerLinks) reads the clock.
  virtual std::int64_t steady_ns(std::int64_t now) { return now; }
};

}  // namespace sandpool::core
