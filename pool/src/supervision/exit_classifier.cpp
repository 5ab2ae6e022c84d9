#include "supervision/exit_classifier.hpp"

#include <csignal>
#include <string>

#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::supervision {
namespace {

// The largest syscall number the violation word may name (+1); anything above is not a
// syscall on any architecture we run on.
constexpr std::uint32_t kMaxSyscallWord = 4096;

// The reporter's exit: it stored the trapped call's number + 1 before _exit, so the word
// names it when it is in range (a scribble can only change which name, never the outcome).
Classified reported_violation(const ExitReport& r) {
  if (r.violation_word != 0 && r.violation_word <= kMaxSyscallWord) {
    return {Outcome::kSandboxViolation,
            "sandbox_violation: " + sandbox::syscall_name(static_cast<int>(r.violation_word - 1))};
  }
  return {Outcome::kSandboxViolation,
          "sandbox_violation: unknown (worker " + std::to_string(r.pid) +
              " left through its SIGSYS reporter, but its report word " +
              std::to_string(r.violation_word) + " names no syscall)"};
}

// Killed by SIGSYS itself: the reporter never leaves this way (it _exits), so the word is
// not its report and is not looked at. The filter's kill action does it (changing SIGSYS's
// handling, a call of another architecture), or a trap on a thread that blocked SIGSYS
// (the kernel then forces the default action). Only the kernel's own record can name it.
Classified killed_by_sigsys(const ExitReport& r) {
  if (r.audited_syscall) {
    return {Outcome::kSandboxViolation,
            "sandbox_violation: " + sandbox::syscall_name(*r.audited_syscall) + " (worker " +
                std::to_string(r.pid) +
                " killed by SIGSYS without reporting; named by the kernel's seccomp audit record)"};
  }
  std::string why =
      "sandbox_violation: unknown (worker " + std::to_string(r.pid) +
      " killed by SIGSYS without reporting: the filter's kill action (a change to SIGSYS's "
      "handling, a call of another architecture) or a trap on a thread that blocked SIGSYS; "
      "the kernel's seccomp audit record is the only account of the call";
  why += r.audit_note.empty() ? std::string(", and none was read") : ", and " + r.audit_note;
  return {Outcome::kSandboxViolation, why + ")"};
}

}  // namespace

ExitReport read_exit_report(const ipc::RegionHeader& header, const ExitStatus& status,
                            std::int32_t pid) {
  ExitReport r;
  r.status = status;
  r.pid = pid;
  r.violation_word = header.violation_syscall.load(std::memory_order_acquire);
  r.fatal_report = header.diagnostics.fatal_report.load(std::memory_order_acquire);
  return r;
}

Classified classify_exit(const ExitReport& r) {
  const std::string who = "worker " + std::to_string(r.pid);
  const ExitStatus& st = r.status;
  if (!st.exited && st.signal == SIGSYS) return killed_by_sigsys(r);
  if (st.exited && st.code == sandbox::kExitViolation) return reported_violation(r);
  // From here on the violation word is never looked at: without the status's say-so it is
  // only what the worker (or a handler scribbling on its region) wrote.

  // The memory report is believed only for the deaths it explains: a worker that lies
  // about it can at most turn its own `lost` into `resource_limit` (both retried).
  const bool memory_report =
      r.fatal_report == static_cast<std::uint32_t>(ipc::FatalReport::kMemory);
  const bool memory_signal =
      !st.exited && (st.signal == SIGSEGV || st.signal == SIGBUS || st.signal == SIGABRT);
  if ((memory_report && memory_signal) || (st.exited && st.code == sandbox::kExitMemory)) {
    return {Outcome::kResourceLimit,
            "resource_limit: memory (address space exhausted; " + who + " " + describe(st) + ")"};
  }
  if (!st.exited && st.signal == SIGKILL && r.cgroup_oom) {
    return {Outcome::kResourceLimit,
            "resource_limit: memory (cgroup memory limit; " + who + " killed by the OOM killer)"};
  }
  if (!st.exited) {
    if (st.signal == SIGXCPU) return {Outcome::kResourceLimit, "resource_limit: cpu"};
    if (st.signal == SIGXFSZ) return {Outcome::kResourceLimit, "resource_limit: file_size"};
    return {Outcome::kLost, who + " " + describe(st)};
  }
  if (st.code == sandbox::kExitProtocol) {
    return {Outcome::kProtocolError,
            "protocol_error: " + who +
                " found its task ring undecodable (the manager's frames are sound by "
                "construction: its own view of the ring was corrupt)"};
  }
  if (st.code == sandbox::kExitRegionCorrupt) {
    return {Outcome::kProtocolError, "protocol_error: " + who +
                                         " found its shared region scribbled on after the "
                                         "task's handler returned"};
  }
  return {Outcome::kLost, who + " " + describe(st)};
}

}  // namespace sandpool::supervision
