// pidfd calls through syscall(2). glibc 2.36 (Debian 12) has the wrappers, but its
// <sys/pidfd.h> lacks extern "C", so C++ callers link against mangled names that do not
// exist. The kernel marks every pidfd close-on-exec.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandpool {

// Returns a pidfd for pid, or -1 with errno set.
inline int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Returns 0, or -1 with errno set (ESRCH once the process has exited).
inline int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

}  // namespace sandpool
