// Telling the manager that a worker died because its address space ran out (RLIMIT_AS,
// sandbox.limits.address_space), so the attempt is `resource_limit: memory`, not `lost`.
//
// Two ways a plugin meets the limit: a failed allocation it does not check (a NULL write:
// SIGSEGV; std::bad_alloc: SIGABRT; a stack that cannot grow: SIGSEGV), or one it does,
// returning SP_FAIL/SP_RETRY. For the first, a handler for SIGSEGV, SIGBUS and SIGABRT (on
// an alternate stack) checks the address space, records FatalReport::kMemory in the
// region and re-raises the signal with its default action, so the worker still dies of
// the signal it got. For the second, the task loop asks address_space_exhausted() after a
// failed handle and leaves with kExitMemory instead of reporting the failure.
//
// "Exhausted" means a PROT_NONE mmap of the headroom fails with ENOMEM, the headroom being
// an eighth of the limit, at most 64 MiB (glibc grows a thread's arena in 64 MiB steps;
// the main arena in much smaller ones). So a crash within the headroom of the limit counts
// as memory, and a single oversized allocation that fails with room to spare does not.
// The probe is async-signal-safe and uses only mmap/munmap, which every profile allows.
#pragma once

#include <sandpool/base/status.hpp>
#include <sandpool/ipc/layout.hpp>

namespace sandpool::worker {

// Reads RLIMIT_AS (call it after the rlimits are applied), allocates the alternate signal
// stack for the calling (task) thread and installs the handler; without an address-space
// limit it installs nothing. Call it before the plugin is loaded, and again right before
// seccomp (the plugin's init may have replaced it). `area` must outlive the process.
Status install_memory_reporter(ipc::DiagnosticArea* area);

// Returns true iff there is an address-space limit and less than the headroom is left.
bool address_space_exhausted();

// Records FatalReport::kMemory, says so on stderr, and _exits with kExitMemory.
[[noreturn]] void leave_memory_exhausted();

}  // namespace sandpool::worker
