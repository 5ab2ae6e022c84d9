#include <sandpool/task/task.hpp>

namespace sandpool {

std::string_view to_string(TaskState s) {
  switch (s) {
    case TaskState::kQueued:
      return "queued";
    case TaskState::kDispatched:
      return "dispatched";
    case TaskState::kRunning:
      return "running";
    case TaskState::kRetryWait:
      return "retry_wait";
    case TaskState::kCompleted:
      return "completed";
    case TaskState::kDeadLettered:
      return "dead_lettered";
    case TaskState::kCancelled:
      return "cancelled";
    case TaskState::kScheduled:
      return "scheduled";
  }
  return "unknown";
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kError:
      return "error";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kTimedOut:
      return "timed_out";
    case Outcome::kLost:
      return "lost";
    case Outcome::kSandboxViolation:
      return "sandbox_violation";
    case Outcome::kResourceLimit:
      return "resource_limit";
    case Outcome::kProtocolError:
      return "protocol_error";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view to_string(DeadReason r) {
  switch (r) {
    case DeadReason::kNone:
      return "";
    case DeadReason::kPermanent:
      return "permanent";
    case DeadReason::kRetriesExhausted:
      return "retries_exhausted";
    case DeadReason::kCrashLoop:
      return "crash_loop";
    case DeadReason::kExpired:
      return "expired";
    case DeadReason::kShutdown:
      return "shutdown";
    case DeadReason::kPoolRemoved:
      return "pool_removed";
    case DeadReason::kRejected:
      return "rejected";
  }
  return "unknown";
}

std::string_view to_string(CancelReason r) {
  switch (r) {
    case CancelReason::kNone:
      return "";
    case CancelReason::kUser:
      return "user";
    case CancelReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

}  // namespace sandpool
