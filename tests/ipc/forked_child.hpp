// A real second process for the cross-process tests: fork() runs a function in the child,
// which exits with its return value. Owns the child: the destructor SIGKILLs and reaps a
// child still running, so a failing assertion in the parent leaves nothing behind.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <utility>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::ipc::testing {

class ForkedChild {
 public:
  // Runs body() in a child process. The child never returns into the test framework: it
  // leaves through _exit (no atexit handlers, no Catch reporting, no flushing of the
  // parent's buffers twice). An exception in the child exits with 101.
  template <class Body>
  explicit ForkedChild(Body&& body) {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test process even if that one crashes before killing it (and checks
      // it has not already gone before the death signal was armed).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(102);
      int rc = 101;
      try {
        rc = std::forward<Body>(body)();
      } catch (...) {
      }
      ::_exit(rc);
    }
  }
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Blocks until the child ends; returns its waitpid status (-1 if waitpid failed).
  int wait() {
    int status = 0;
    Result<pid_t> r = posix_call("waitpid", [&] { return ::waitpid(pid_, &status, 0); });
    reaped_ = true;
    return r.is_ok() ? status : -1;
  }
  // SIGKILLs the child and reaps it; returns its waitpid status.
  int kill() {
    ::kill(pid_, SIGKILL);
    return wait();
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace sandpool::ipc::testing
