// Hung-task diagnostics over the shared region (layout.hpp, DiagnosticArea). Before it kills
// a worker that timed out or went silent, the manager asks every thread of the worker where
// it is: it opens a request, sends backtrace_signal() to each thread (the task thread
// first, at most kMaxBacktraceThreads), then says how many it signalled. Each thread's
// handler in the worker host answers with one section ("thread <tid> (task thread)", then
// one frame per line) and rings the doorbell. Nothing on the manager's side blocks or
// trusts the worker: the words and the text are read as hostile input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/ipc/layout.hpp>

namespace sandpool::ipc {

// The real-time signal the worker host reserves for backtrace requests: SIGRTMIN + 4
// (glibc keeps the two below SIGRTMIN for itself; plugins rarely touch the real-time range,
// unlike SIGUSR1/SIGUSR2).
int backtrace_signal();

// ---- manager side ----------------------------------------------------------------------

// Opens a new request: forgets the earlier answer (text and counters) and starts a new
// generation, so a handler that answered the last request answers again. The caller then
// signals the threads and calls expect_backtraces().
void request_backtrace(DiagnosticArea& area);
// Records how many threads were signalled; the answer is complete once as many answered.
void expect_backtraces(DiagnosticArea& area, std::uint32_t threads);

enum class BacktraceRead {
  kComplete,     // only once every signalled thread answered
  kWhatArrived,  // whatever sections are there (the grace is over or the worker died)
};

// The answer copied out of the region: at most kBacktraceBytes bytes whatever the words
// say, NUL bytes (space reserved but not written) dropped, every other byte outside
// printable ASCII and '\n' replaced by '?', trailing newlines dropped. An incomplete answer
// read as kWhatArrived ends with a line saying how many threads answered. nullopt while
// there is nothing to return.
std::optional<std::string> take_backtrace(const DiagnosticArea& area,
                                          BacktraceRead read = BacktraceRead::kComplete);

// ---- worker side (async-signal-safe) -------------------------------------------------

// The open request's generation, 0 when none was ever opened.
std::uint32_t backtrace_generation(const DiagnosticArea& area);
// Appends one thread's section: reserves `len` bytes (what does not fit in the array is
// dropped), copies `text` and counts the thread answered. Lock-free, no allocation.
void answer_backtrace(DiagnosticArea& area, const char* text, std::size_t len);

}  // namespace sandpool::ipc
