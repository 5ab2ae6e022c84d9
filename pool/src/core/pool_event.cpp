// PoolEvent's names (the task vocabulary's are in task/src/vocabulary.cpp).
#include <sandpool/pool/pool.hpp>

namespace sandpool {

std::string_view to_string(PoolEvent::Kind k) {
  switch (k) {
    case PoolEvent::Kind::kWorkerStarted:
      return "worker_started";
    case PoolEvent::Kind::kWorkerReady:
      return "worker_ready";
    case PoolEvent::Kind::kWorkerExited:
      return "worker_exited";
    case PoolEvent::Kind::kAttemptEnded:
      return "attempt_ended";
    case PoolEvent::Kind::kTaskEnded:
      return "task_ended";
    case PoolEvent::Kind::kScaled:
      return "scaled";
  }
  return "unknown";
}

}  // namespace sandpool
