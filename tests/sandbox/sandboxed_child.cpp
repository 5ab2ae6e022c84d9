#include "sandboxed_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <new>

#include <sandpool/sandbox/lockdown.hpp>

namespace sandpool::sandbox::testing {

bool ChildResult::exited_with(int code) const {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == code;
}

bool ChildResult::killed_by(int signal) const {
  return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal;
}

std::string ChildResult::describe() const {
  std::string s = WIFEXITED(wait_status) ? "exit " + std::to_string(WEXITSTATUS(wait_status))
                                         : "signal " + std::to_string(WTERMSIG(wait_status));
  s += ", violation word " + std::to_string(violation);
  if (!stderr_text.empty()) s += ", stderr: " + stderr_text;
  return s;
}

ChildResult run_sandboxed(const SandboxPolicy& policy, const std::function<int()>& body,
                          const std::function<void()>& before_filter) {
  // The reporter's word must be visible to the parent after the child dies.
  void* shared = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) std::abort();
  auto* word = new (shared) std::atomic<std::uint32_t>(0);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) std::abort();

  const pid_t pid = ::fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    ::dup2(err_pipe[1], STDERR_FILENO);
    // Like the exec'd worker, start from default dispositions: Catch2's handlers for fatal
    // signals would otherwise run (and call sigaction) inside the filter.
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    }
    if (before_filter) before_filter();
    if (!install_sigsys_reporter(word) || !set_no_new_privs()) ::_exit(kChildSetupFailed);
    Status s = install_seccomp(policy);
    if (!s) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      ::_exit(kChildSetupFailed + 1);
    }
    ::_exit(body());
  }
  ::close(err_pipe[1]);

  ChildResult result;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  pollfd p{pidfd, POLLIN, 0};
  if (pidfd < 0 || ::poll(&p, 1, 30000) != 1) ::kill(pid, SIGKILL);
  ::waitpid(pid, &result.wait_status, 0);
  if (pidfd >= 0) ::close(pidfd);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(err_pipe[0], buf, sizeof buf)) > 0) result.stderr_text.append(buf, n);
  ::close(err_pipe[0]);
  result.violation = word->load();
  ::munmap(shared, 4096);
  return result;
}

}  // namespace sandpool::sandbox::testing
