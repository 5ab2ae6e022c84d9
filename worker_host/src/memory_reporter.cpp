#include "memory_reporter.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::worker {
namespace {

constexpr std::size_t kAltStackBytes = 64 * 1024;
constexpr std::uint64_t kMaxHeadroom = 64ull << 20;
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGABRT};

// Set before the handler is installed; a signal handler has no other way to its context.
ipc::DiagnosticArea* g_area = nullptr;
std::size_t g_headroom = 0;  // 0: no address-space limit, nothing to report
void* g_alt_stack = nullptr;

void say(const char* text) {
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
}

void record_memory() {
  if (g_area != nullptr) {
    g_area->fatal_report.store(static_cast<std::uint32_t>(ipc::FatalReport::kMemory),
                               std::memory_order_release);
  }
}

void on_fatal_signal(int sig, siginfo_t*, void*) {
  const int saved_errno = errno;
  if (address_space_exhausted()) {
    record_memory();
    say("sandpool-worker: address space exhausted (RLIMIT_AS); dying of the fatal signal\n");
  }
  errno = saved_errno;
  // SA_RESETHAND restored the default action on entry, and the signal stays blocked until
  // the handler returns: re-raised here, it kills the worker right after, with the same
  // signal (a fault would also recur, but abort() and kill() do not).
  ::syscall(SYS_tgkill, ::getpid(), ::gettid(), sig);
}

}  // namespace

bool address_space_exhausted() {
  if (g_headroom == 0) return false;
  void* p =
      ::mmap(nullptr, g_headroom, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return errno == ENOMEM;
  ::munmap(p, g_headroom);
  return false;
}

void leave_memory_exhausted() {
  record_memory();
  say("sandpool-worker: a task failed with the address space exhausted (RLIMIT_AS); exiting\n");
  ::_exit(sandbox::kExitMemory);
}

Status install_memory_reporter(ipc::DiagnosticArea* area) {
  rlimit as{};
  auto got = posix_call("getrlimit(RLIMIT_AS)", [&] { return ::getrlimit(RLIMIT_AS, &as); });
  if (!got) return got.status();
  if (as.rlim_cur == RLIM_INFINITY) return Status::ok();
  g_area = area;
  g_headroom = static_cast<std::size_t>(std::min<std::uint64_t>(as.rlim_cur / 8, kMaxHeadroom));
  if (g_alt_stack == nullptr) {
    // Its own mapping, so a handler running for a stack overflow or an exhausted heap
    // still has a stack.
    auto stack = posix_call("mmap(alternate signal stack)", [] {
      return ::mmap(nullptr, kAltStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    });
    if (!stack) return stack.status();
    g_alt_stack = *stack;
  }
  stack_t ss{};
  ss.ss_sp = g_alt_stack;
  ss.ss_size = kAltStackBytes;
  auto alt = posix_call("sigaltstack", [&] { return ::sigaltstack(&ss, nullptr); });
  if (!alt) return alt.status();
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigfillset(&sa.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int sig : kFatalSignals) {
    auto r = posix_call("sigaction(fatal signal)", [&] { return ::sigaction(sig, &sa, nullptr); });
    if (!r) return r.status();
    sigaddset(&unblock, sig);
  }
  return posix_call_rc("pthread_sigmask(SIG_UNBLOCK, fatal signals)",
                       [&] { return ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr); });
}

}  // namespace sandpool::worker
