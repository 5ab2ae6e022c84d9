// Kill reasons: their names and which of them count as a restart (worker_state.hpp).
#include "core/worker_state.hpp"

namespace sandpool::core {

std::string_view to_string(KillReason r) {
  switch (r) {
    case KillReason::kInitTimeout:
      return "init_timeout";
    case KillReason::kTaskTimeout:
      return "task_timeout";
    case KillReason::kCpuLimit:
      return "cpu_limit";
    case KillReason::kCancelIgnored:
      return "cancel_ignored";
    case KillReason::kWithdrawalIgnored:
      return "withdrawal_ignored";
    case KillReason::kMissedHeartbeats:
      return "missed_heartbeats";
    case KillReason::kProtocolError:
      return "protocol_error";
    case KillReason::kStopTimeout:
      return "stop_timeout";
    case KillReason::kUnwanted:
      return "unwanted";
    case KillReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

bool counts_as_restart(KillReason r) {
  return r == KillReason::kMissedHeartbeats || r == KillReason::kProtocolError;
}

}  // namespace sandpool::core
