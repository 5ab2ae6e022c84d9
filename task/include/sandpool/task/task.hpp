// The task vocabulary shared by the API, the CLI, logs, metrics and docs (docs/architecture.md,
// "Task states, outcomes and reasons").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandpool {

enum class TaskState : std::uint8_t {
  kQueued,
  kDispatched,
  kRunning,
  kRetryWait,
  kCompleted,     // terminal
  kDeadLettered,  // terminal
  kCancelled,     // terminal
  // Submitted with a not_before (or delay) still ahead: waits outside the queue until due,
  // then kQueued. Last, so that the values above (which the journal stores) keep theirs.
  kScheduled,
};

enum class Outcome : std::uint8_t {
  kOk,
  kError,   // SP_RETRY
  kFailed,  // SP_FAIL, or a permanent failure such as a result over max_result
  kTimedOut,
  kLost,              // the worker died or vanished mid-task
  kSandboxViolation,  // a forbidden syscall (the error names it)
  kResourceLimit,     // memory, cpu or file_size (the error says which)
  kProtocolError,     // the worker broke the ring
  kCancelled,         // the task was cancelled while running
};

enum class DeadReason : std::uint8_t {
  kNone,
  kPermanent,
  kRetriesExhausted,
  kCrashLoop,
  kExpired,
  kShutdown,
  kPoolRemoved,
  // A Redis pool's task that nodes refused to run (TaskConsumer::kMaxRefusals times): its type,
  // timeout or payload is not one their pools accept (a config that changed after it was
  // submitted).
  kRejected,
};

enum class CancelReason : std::uint8_t { kNone, kUser, kShutdown };

std::string_view to_string(TaskState s);
std::string_view to_string(Outcome o);
std::string_view to_string(DeadReason r);
std::string_view to_string(CancelReason r);
inline bool is_terminal(TaskState s) {
  return s >= TaskState::kCompleted && s <= TaskState::kCancelled;
}

// One try of a task on a worker.
struct Attempt {
  std::uint32_t number = 0;  // 1-based
  Outcome outcome = Outcome::kOk;
  std::string error;  // empty for ok
  std::int32_t worker_pid = 0;
  std::int64_t started_ms = 0;  // wall clock (ms since the epoch) at dispatch
  std::int64_t ended_ms = 0;
  // Where the worker's task thread was when a timed-out or silent worker was killed, one
  // frame per line (PoolOptions::backtrace_grace); empty when none was captured.
  std::string backtrace{};  // {}: six-field brace lists stay free of missing-initializer warnings
};

// A task's final (or current) account.
struct TaskResult {
  std::uint64_t id = 0;
  std::string type;
  TaskState state = TaskState::kQueued;
  DeadReason reason = DeadReason::kNone;             // for kDeadLettered
  CancelReason cancel_reason = CancelReason::kNone;  // for kCancelled
  std::string result;                                // the handler's output, for kCompleted
  std::string error;  // the last attempt's error, or why it never ran
  std::vector<Attempt> history;
  // Decided dead-lettered, its letter not yet written to the dead-letter store: `state` is
  // still the last intermediate one, and turns kDeadLettered once the letter is durable.
  bool dead_letter_pending = false;
  // Scheduled: the wall-clock time (ms since the epoch) before which it was not queued;
  // 0: none. Its tenant (SubmitOptions::tenant), "" for the default one.
  std::int64_t not_before_ms = 0;
  std::string tenant;
  std::uint32_t attempts() const { return static_cast<std::uint32_t>(history.size()); }
};

}  // namespace sandpool
