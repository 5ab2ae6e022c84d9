// The SIGSYS handler behind the seccomp filter's default action (SCMP_ACT_TRAP). It runs
// inside the sandbox, on the thread that made the forbidden call, so it may only use what
// every profile allows and what is async-signal-safe: an atomic store, write(2), _exit.
#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include <sandpool/base/signal_handler.hpp>

namespace sandpool::sandbox {
namespace {

// si_code of a SIGSYS raised by seccomp: SYS_SECCOMP from <asm-generic/siginfo.h>, which
// cannot be included next to glibc's <signal.h>.
constexpr int kSysSeccomp = 1;

// Set once before the filter exists, read only by the handler. A signal handler has no
// other way to reach its context.
std::atomic<std::uint32_t>* g_violation_word = nullptr;

// Appends the decimal form of v at *p (no snprintf: it is not async-signal-safe).
char* append_decimal(char* p, std::uint32_t v) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}

char* append(char* p, const char* s) {
  const std::size_t n = std::strlen(s);
  std::memcpy(p, s, n);
  return p + n;
}

void on_sigsys(int, siginfo_t* info, void*) {
  char line[128];
  char* p = line;
  // SYS_SECCOMP marks a SIGSYS raised by the filter; anything else (a kill from outside) has
  // no syscall to report, but the process is not to be trusted any more either.
  if (info->si_code == kSysSeccomp) {
    const auto nr = static_cast<std::uint32_t>(info->si_syscall);
    if (g_violation_word != nullptr) g_violation_word->store(nr + 1, std::memory_order_release);
    p = append(p, "sandpool-worker: seccomp: forbidden syscall ");
    p = append_decimal(p, nr);
  } else {
    p = append(p, "sandpool-worker: SIGSYS not raised by seccomp");
  }
  *p++ = '\n';
  [[maybe_unused]] ssize_t ignored =
      ::write(STDERR_FILENO, line, static_cast<std::size_t>(p - line));
  ::_exit(kExitViolation);
}

}  // namespace

Status install_sigsys_reporter(std::atomic<std::uint32_t>* word) {
  g_violation_word = word;
  // Nothing else runs while we report. Unblocked: a plugin that blocked SIGSYS during init
  // would turn every trap into a plain kill by SIGSYS (the kernel forces a blocked trap
  // signal to its default action), losing the report.
  return install_unblocked_handler(SIGSYS, on_sigsys, 0, "SIGSYS");
}

}  // namespace sandpool::sandbox
