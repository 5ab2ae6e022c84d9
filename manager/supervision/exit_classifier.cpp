#include "supervision/exit_classifier.hpp"

#include <csignal>
#include <string>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::supervision {

Classified classify_exit(const ExitReport& r) {
  const std::string who = "worker " + std::to_string(r.pid);
  // A SIGSYS report is only believed for a syscall number in range; the word is
  // worker-writable, so anything else is reported as an unknown syscall.
  if (r.violation_word != 0 || (r.status.exited && r.status.code == sandbox::kExitViolation)) {
    std::string name = "unknown";
    if (r.violation_word != 0 && r.violation_word <= 4096) {
      name = sandbox::syscall_name(static_cast<int>(r.violation_word - 1));
    }
    return {Outcome::kSandboxViolation, "sandbox_violation: " + name};
  }
  // The memory report is believed only for the deaths it explains: a worker that lies
  // about it can at most turn its own `lost` into `resource_limit` (both retried).
  const bool memory_report =
      r.fatal_report == static_cast<std::uint32_t>(ipc::FatalReport::kMemory);
  const bool memory_signal =
      !r.status.exited &&
      (r.status.signal == SIGSEGV || r.status.signal == SIGBUS || r.status.signal == SIGABRT);
  if ((memory_report && memory_signal) ||
      (r.status.exited && r.status.code == sandbox::kExitMemory)) {
    return {Outcome::kResourceLimit, "resource_limit: memory (address space exhausted; " + who +
                                         " " + describe(r.status) + ")"};
  }
  if (!r.status.exited && r.status.signal == SIGKILL && r.cgroup_oom) {
    return {Outcome::kResourceLimit,
            "resource_limit: memory (cgroup memory limit; " + who + " killed by the OOM killer)"};
  }
  if (!r.status.exited) {
    if (r.status.signal == SIGXCPU) return {Outcome::kResourceLimit, "resource_limit: cpu"};
    if (r.status.signal == SIGXFSZ) return {Outcome::kResourceLimit, "resource_limit: file_size"};
    if (r.status.signal == SIGSYS)
      return {Outcome::kSandboxViolation, "sandbox_violation: unknown"};
    return {Outcome::kLost, who + " " + describe(r.status)};
  }
  if (r.status.code == sandbox::kExitProtocol) {
    return {Outcome::kProtocolError, who + " rejected the manager's frames"};
  }
  return {Outcome::kLost, who + " " + describe(r.status)};
}

}  // namespace sandpool::supervision
