// install_unblocked_handler (base/include/sandpool/base/signal_handler.hpp), which the worker
// host's SIGSYS and backtrace reporters both use: in a forked child, so the test process
// keeps its own dispositions and mask.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <sandpool/base/signal_handler.hpp>

using namespace sandpool;

namespace {

volatile sig_atomic_t g_seen_signal = 0;
volatile sig_atomic_t g_blocked_inside = 0;

void record(int sig, siginfo_t*, void*) {
  g_seen_signal = sig;
  sigset_t now;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &now);
  g_blocked_inside = sigismember(&now, SIGUSR2);  // every signal blocked while it runs
}

// Runs body in a child; returns its exit code (-1 if it did not exit normally).
int in_child(int (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a handler installed while its signal is blocked runs, with every signal blocked") {
  CHECK(in_child([] {
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, SIGUSR1);
          ::pthread_sigmask(SIG_BLOCK, &set, nullptr);  // as a plugin's init might
          if (!install_unblocked_handler(SIGUSR1, record, 0, "SIGUSR1")) return 2;
          ::raise(SIGUSR1);
          if (g_seen_signal != SIGUSR1) return 3;
          return g_blocked_inside ? 0 : 4;
        }) == 0);
}

TEST_CASE("a handler that cannot be installed names the call and the signal") {
  const Status s = install_unblocked_handler(SIGKILL, record, 0, "SIGKILL");
  REQUIRE_FALSE(s);
  CHECK(s.message().find("sigaction(SIGKILL)") != std::string::npos);
}
