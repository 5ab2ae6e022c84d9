// Turns what is known about a worker's end into the outcome of the task it was running.
// Pure: unit-tested without processes.
//
// The kernel's word first (docs/security.md, "Worker-writable memory audit"): the exit
// status comes from the kernel (waitid on the pidfd) and decides the outcome; the words
// the worker wrote into its shared region only add detail to an outcome the status
// already implies. A worker that scribbles on its region therefore cannot turn a crash or
// a protocol error into an outcome that ends retries (sandbox_violation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/pool/spawner.hpp>
#include <sandpool/task/task.hpp>

namespace sandpool::supervision {

struct ExitReport {
  ExitStatus status;                 // kernel-written: the only part that decides
  std::uint32_t violation_word = 0;  // the header's SIGSYS report (syscall number + 1)
  std::int32_t pid = 0;
  std::uint32_t fatal_report = 0;  // the region's ipc::FatalReport (worker-writable)
  bool cgroup_oom = false;         // the worker's cgroup counts an OOM kill (kernel-written)
  // For a worker killed by SIGSYS: the syscall the kernel's seccomp audit record names for
  // its pid (seccomp_audit.hpp), kernel-written; or nullopt with `audit_note` saying why
  // there is none.
  std::optional<int> audited_syscall{};  // {}: shorter brace lists stay warning-free
  std::string audit_note{};
};

// Returns a report of the worker-writable words of `header` read once, with `status` and
// `pid`: what reap() hands to classify_exit.
ExitReport read_exit_report(const ipc::RegionHeader& header, const ExitStatus& status,
                            std::int32_t pid);

struct Classified {
  Outcome outcome = Outcome::kLost;
  std::string error;
};

// Returns the outcome for a task that was inside handle() when the worker ended this way:
// - sandbox_violation only when the status says so: killed by SIGSYS (named by the kernel's
//   audit record, else "unknown" with the reason), or the SIGSYS reporter's exit code
//   (named by the violation word when it is a syscall number, else "unknown");
// - resource_limit: SIGXCPU (cpu), SIGXFSZ (file_size), memory (kExitMemory;
//   SIGSEGV/SIGBUS/SIGABRT with the worker's memory report; SIGKILL with an OOM kill
//   counted by its cgroup);
// - protocol_error (retried): kExitProtocol (the worker found its task ring undecodable)
//   and kExitRegionCorrupt (it found its shared state scribbled on after a handler);
// - lost otherwise.
Classified classify_exit(const ExitReport& report);

}  // namespace sandpool::supervision
