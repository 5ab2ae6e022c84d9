#include "init_deadline.hpp"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::worker {
namespace {

// Formatted before arming: the handler may only write(2) and _exit.
char g_message[128];
std::size_t g_message_len = 0;

void on_alarm(int) {
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, g_message, g_message_len);
  ::_exit(sandbox::kExitInit);
}

itimerval timer_of(std::uint32_t ms) {
  itimerval t{};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return t;
}

}  // namespace

Status InitDeadline::arm(std::uint32_t timeout_ms) {
  const int n =
      std::snprintf(g_message, sizeof g_message,
                    "sandpool-worker: plugin load/init did not finish within %u ms\n", timeout_ms);
  g_message_len =
      n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof g_message - 1) : 0;
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  auto r = posix_call("sigaction(SIGALRM)", [&] { return ::sigaction(SIGALRM, &sa, nullptr); });
  if (!r) return r.status();
  const itimerval t = timer_of(timeout_ms);
  auto set =
      posix_call("setitimer(ITIMER_REAL)", [&] { return ::setitimer(ITIMER_REAL, &t, nullptr); });
  if (!set) return set.status();
  armed_ = true;
  return Status::ok();
}

void InitDeadline::disarm() {
  if (!armed_) return;
  armed_ = false;
  const itimerval off = timer_of(0);
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::signal(SIGALRM, SIG_DFL);
}

}  // namespace sandpool::worker
