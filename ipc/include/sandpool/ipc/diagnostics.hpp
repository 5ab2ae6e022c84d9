// Hung-task diagnostics over the shared region (layout.hpp, DiagnosticArea): the manager's
// half. Before it kills a worker that timed out or went silent, the manager asks the
// worker's task thread (the main thread, tid == pid) for a backtrace with
// backtrace_signal(); the worker host's handler writes the text into the region and rings
// the doorbell. Nothing here blocks or trusts the worker.
#pragma once

#include <optional>
#include <string>

#include <sandpool/ipc/layout.hpp>

namespace sandpool::ipc {

// The real-time signal the worker host reserves for backtrace requests: SIGRTMIN + 4
// (glibc keeps the two below SIGRTMIN for itself; plugins rarely touch the real-time range,
// unlike SIGUSR1/SIGUSR2).
int backtrace_signal();

// Marks a request in the area (kRequested), discarding an earlier answer. The caller then
// sends backtrace_signal() to the worker's main thread.
void request_backtrace(DiagnosticArea& area);

// Returns the worker's answer once it is complete (kDone), copied out of the region:
// at most kBacktraceBytes bytes whatever the length word says, every byte outside
// printable ASCII and '\n' replaced by '?', trailing newlines dropped. nullopt while
// there is no complete answer.
std::optional<std::string> take_backtrace(const DiagnosticArea& area);

}  // namespace sandpool::ipc
