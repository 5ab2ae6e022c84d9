// One worker as the pool core sees it: its lifecycle as one explicit state, and its ring.
// Every state that waits on the worker carries the deadline that ends in SIGKILL:
//
//   Starting{deadline} --ready--> Ready --drain--> Draining --ring empty--> Stopping{deadline}
//        |                          |                 |                         |
//        +---- kill (any reason: a Killing{...}) -----+-------------------------+
//
// Starting waits for the worker's Ready until init_timeout; Draining waits for the tasks of
// its ring, each bounded by its own timeout and cancel grace; Stopping waits for the exit
// after Stop until stop_timeout; Killing waits, at most backtrace_grace, for a hung worker's
// backtrace before the SIGKILL, after which the kernel ends it (its pidfd reports the exit).
// Private to PoolCore's implementation. Loop-thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <variant>

#include <sandpool/task/task.hpp>

#include "core/task_record.hpp"

namespace sandpool::core {

using WorkerId = std::uint64_t;

// Why the pool killed a worker. Decides whether the exit counts toward restart intensity.
enum class KillReason : std::uint8_t {
  kInitTimeout,        // init ran past init_timeout (an init failure, counted as such)
  kTaskTimeout,        // the task at the front of its ring ran past its timeout
  kCpuLimit,           // ... past its cpu_time
  kCancelIgnored,      // a cancelled task kept running cancel_grace after it could stop
  kWithdrawalIgnored,  // a task withdrawn from its ring kept running cancel_grace
  kMissedHeartbeats,   // silent while idle for missed_heartbeats intervals
  kProtocolError,      // broke the ring protocol
  kStopTimeout,        // still alive stop_timeout after Stop
  kUnwanted,           // no longer wanted while it was starting (scaled down, closed)
  kShutdown,           // its tasks were abandoned (a shutdown past its timeout)
};
std::string_view to_string(KillReason r);
// Returns true iff a worker killed for `r` counts as an unexpected exit (a restart): it
// misbehaved (missed heartbeats, a protocol error). A task's own limits (timeout, CPU), a
// user's cancel, a stop or an unwanted worker do not, so no client can push a pool into
// crash_loop for everybody with tasks that time out or get cancelled.
bool counts_as_restart(KillReason r);

struct Starting {
  std::int64_t deadline_ns;  // spawned + init_timeout
};
struct Ready {
  bool replace_pending = false;  // a rolling restart will drain it in its turn
};
struct Draining {};
struct Stopping {
  std::int64_t deadline_ns;  // Stop sent + stop_timeout
};
struct Killing {
  KillReason why;
  Outcome outcome;                    // for the task the kill is for
  std::string error;                  // that attempt's error
  std::uint64_t task = 0;             // the task it is killed for; 0: none in particular
  std::int64_t backtrace_due_ns = 0;  // non-zero: SIGKILL once the backtrace is in or then
};
using WorkerState = std::variant<Starting, Ready, Draining, Stopping, Killing>;

// One task in a worker's ring.
struct InFlight {
  enum class Ask : std::uint8_t { kNone, kCancel, kWithdraw };
  TaskPtr task;
  std::uint32_t attempt = 0;
  std::int64_t dispatched_ns = 0;
  std::int64_t started_wall_ms = 0;
  std::int64_t deadline_ns = 0;
  // What the pool asked the worker to do with it: stop it (a user's cancel) or drop it (it
  // timed out waiting in the ring). Once the entry is at the front of the ring the worker has
  // cancel_grace to answer, else it is killed.
  Ask ask = Ask::kNone;
  std::int64_t asked_ns = 0;
  // Its attempt has ended already (withdrawn, or abandoned at shutdown): whatever the worker
  // answers for it is dropped, and its worker's death is charged to nobody through it.
  bool ended = false;
  // Its start was handed to the journal: the worker's started word named it while it was the
  // front of the ring (PoolCore::observe_running). A task only queued in the ring has none.
  bool start_journaled = false;
};

struct Worker {
  WorkerId id = 0;
  WorkerState state = Starting{0};
  std::int64_t spawned_ns = 0;
  std::int64_t ready_ns = 0;  // 0: never became ready (its exit is an init failure)
  std::uint64_t tasks_done = 0;
  std::deque<InFlight> ring;        // in the order sent: the front is running or runs next
  std::deque<TaskPtr> backlog;      // affinity tasks waiting for this worker
  std::int64_t front_since_ns = 0;  // when ring.front() became the front
  std::int64_t last_work_ns = 0;    // ready, or last given or done with a task: idle since
  std::int64_t cpu_base_ns = -1;    // its CPU time when the front was first seen (cpu_time)
  std::uint64_t frame_cap = 0;      // the largest payload its region was sized for
  std::uint64_t rss_sampled = 0;    // its RSS at the last sweep (PoolCore::samples_rss); 0: none
  std::int64_t cpu_limit_ns = 0;    // its RLIMIT_CPU (worker_cpu_seconds), the lifetime backstop
  std::string last_error;           // its last error-level log line
  std::string isolation;            // as it reported when ready
  std::string backtrace;            // a hung worker's answer, for the attempt it is killed for
  std::uint64_t generation = 0;     // the launch spec it was started with
  std::uint32_t slot = 0;           // see WorkerInfo::slot
  std::uint64_t slot_restarts = 0;  // workers started in its slot before it

  template <typename S>
  bool is() const {
    return std::holds_alternative<S>(state);
  }
  // Starting or ready: it counts toward the pool's worker target.
  bool live() const { return is<Starting>() || is<Ready>(); }
  Killing* killing() { return std::get_if<Killing>(&state); }
  const Killing* killing() const { return std::get_if<Killing>(&state); }
};

}  // namespace sandpool::core
