// Turns what is known about a worker's end into the outcome of the task it was running.
// Pure: unit-tested without processes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/spawner.hpp>
#include <sandpool/task.hpp>

namespace sandpool::supervision {

struct ExitReport {
  ExitStatus status;
  std::uint32_t violation_word = 0;  // the header's SIGSYS report (syscall number + 1)
  std::int32_t pid = 0;
  std::uint32_t fatal_report = 0;  // the region's ipc::FatalReport (worker-writable)
  bool cgroup_oom = false;         // the worker's cgroup counts an OOM kill (kernel-written)
};

struct Classified {
  Outcome outcome = Outcome::kLost;
  std::string error;
};

// Returns the outcome for a task that was inside handle() when the worker ended this way:
// sandbox_violation (naming the syscall), resource_limit (SIGXCPU: cpu, SIGXFSZ:
// file_size; memory: kExitMemory, SIGSEGV/SIGBUS/SIGABRT with the worker's memory report,
// or SIGKILL with an OOM kill counted by its cgroup), protocol_error (the worker said the
// manager's frames were bad), or lost.
Classified classify_exit(const ExitReport& report);

}  // namespace sandpool::supervision
