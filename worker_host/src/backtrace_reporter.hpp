// The worker host's answer to the manager's backtrace request (ipc/diagnostics.hpp): a
// handler for ipc::backtrace_signal() that runs on each thread the manager signals and
// appends where that thread is to the region's DiagnosticArea: a line "thread <tid>" (with
// " (task thread)" for the main thread), then one frame per line ("#3 hang_forever+0x1a
// (libhang.so)", or "#4 0x7f.. (libfoo.so+0x1234)" when dladdr finds no symbol, or the bare
// address), and rings the manager's doorbell. The handler's own frames and the signal
// trampoline are left out: frame #0 is where the thread was interrupted. Each thread
// answers a request once.
//
// Async-signal-safety: glibc's backtrace() dlopens libgcc_s on its first call, which is
// neither signal-safe nor possible under seccomp, so install() calls it once up front. After
// that the handler uses backtrace() (libgcc's unwinder finds frames through
// _dl_find_object, lock-free), dladdr() (takes the loader's lock: a thread interrupted
// inside dlopen would make it wait, and the manager's grace period then ends it), stores,
// and write(2) on the doorbell: no allocation, no syscall that any profile forbids.
#pragma once

#include <sandpool/base/status.hpp>
#include <sandpool/ipc/layout.hpp>

namespace sandpool::worker {

// Installs the handler (SA_SIGINFO, SA_RESTART, every signal blocked while it runs) and
// unblocks the signal on the calling thread, which must be the task thread (threads the
// plugin starts inherit the unblocked mask). `area` and
// `doorbell_fd` must stay valid for the life of the process. Call it before the plugin is
// loaded, and again right before seccomp: the plugin's init may have replaced or blocked
// it, and after seccomp a plugin can no longer change the disposition.
Status install_backtrace_reporter(ipc::DiagnosticArea* area, int doorbell_fd);

// Frames in the object loaded under the name `loaded_as` are shown under the file name of
// `shown_as` instead: the plugin is loaded through "/proc/self/fd/N", whose last part says
// nothing. Copies both (truncated to fit fixed buffers); call it once, after the plugin is
// loaded and before the second install_backtrace_reporter.
void name_loaded_object(const char* loaded_as, const char* shown_as);

// Writes the calling thread's section the way the handler does into `out` (at most
// `capacity` bytes), skipping the frames up to and including `interrupted_pc` when
// non-null. Returns the bytes written. Async-signal-safe once install_backtrace_reporter
// has run. Exposed for tests.
std::size_t write_thread_backtrace(char* out, std::size_t capacity, const void* interrupted_pc);

}  // namespace sandpool::worker
