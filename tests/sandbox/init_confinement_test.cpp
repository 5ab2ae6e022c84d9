// Step 5's confinement of the plugin's init, for real in forked children: the init layer
// (install_init_seccomp) and the check on the processes init leaves (end_init_children).
#include <catch2/catch.hpp>

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include "sandbox/sandboxed_child.hpp"

using namespace sandpool::sandbox;
using sandpool::sandbox::testing::ChildResult;
using sandpool::sandbox::testing::run_sandboxed;

namespace {

// run_sandboxed installs no filter of its own for this policy: the body installs what it
// tests (no_new_privs is set already).
SandboxPolicy no_final_filter() {
  SandboxPolicy p;
  p.profile = SeccompProfile::kOff;
  return p;
}

// Returns true iff a fork() from here gives a child (which exits at once and is reaped).
bool fork_works() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  if (child < 0) return false;
  ::waitpid(child, nullptr, 0);
  return true;
}

// Returns true iff starting and joining a thread works.
bool thread_works() {
  std::atomic<bool> ran{false};
  try {
    std::thread t([&] { ran = true; });
    t.join();
  } catch (...) {
    return false;
  }
  return ran;
}

// A child that pauses until killed; returns its pid.
pid_t paused_child() {
  const pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  return child;
}

}  // namespace

TEST_CASE("under the init layer fork, exec and ptrace fail with EPERM, and threads start") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  SandboxPolicy policy;
  policy.profile = profile;
  ChildResult r = run_sandboxed(no_final_filter(), [&] {
    if (!install_init_seccomp(policy)) return 10;
    if (fork_works() || errno != EPERM) return 1;
    if (::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) != -1 || errno != EPERM) return 2;
    std::uint64_t args[11] = {};  // struct clone_args (88 bytes); exit_signal is the 5th
    args[4] = SIGCHLD;
    if (::syscall(SYS_clone3, args, sizeof args) != -1 || errno != ENOSYS) return 3;
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    if (::execve("/bin/true", argv, environ) != -1 || errno != EPERM) return 4;
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != -1 || errno != EPERM) return 5;
    pid_t spawned = 0;
    if (::posix_spawn(&spawned, "/bin/true", nullptr, nullptr, argv, environ) != EPERM) return 6;
    if (::syscall(SYS_vfork) != -1 || errno != EPERM) return 7;
    if (!thread_works()) return 8;  // glibc falls back from clone3 to clone(CLONE_THREAD)
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("under the init layer no socket can be made, unless sandbox.init.network allows it") {
  const bool network = GENERATE(false, true);
  INFO((network ? "init.network: true" : "init.network: false (the default)"));
  SandboxPolicy policy;
  policy.init.network = network;
  ChildResult r = run_sandboxed(no_final_filter(), [&] {
    if (!install_init_seccomp(policy)) return 10;
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 1;  // reaches nothing: kept
    for (int family : {AF_INET, AF_INET6, AF_UNIX, AF_NETLINK}) {
      const int fd = ::socket(family, SOCK_STREAM, 0);
      if (network && fd < 0 && family != AF_NETLINK) return 2;
      if (!network && (fd >= 0 || errno != EPERM)) return 3;
      if (fd >= 0) ::close(fd);
    }
    // io_uring could make a socket without the socket call.
    const long ring = ::syscall(SYS_io_uring_setup, 1, nullptr);
    if (!network && (ring != -1 || errno != EPERM)) return 4;
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a call the pool allows is left out of the init layer, and said so") {
  SandboxPolicy policy;
  policy.profile = SeccompProfile::kRelaxed;
  policy.allow_syscalls = {"clone", "getppid"};
  CHECK(init_layer_exemptions(policy) == std::vector<std::string>{"clone"});
  ChildResult r = run_sandboxed(no_final_filter(), [&] {
    if (!install_init_seccomp(policy)) return 10;
    if (!fork_works()) return 1;  // fork is clone here
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    if (::execve("/bin/true", argv, environ) != -1 || errno != EPERM) return 2;
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("with seccomp off there is no init layer") {
  CHECK(init_layer_exemptions(no_final_filter()).empty());
  ChildResult r = run_sandboxed(no_final_filter(), [] {
    if (!install_init_seccomp(no_final_filter())) return 10;
    return fork_works() ? 0 : 1;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("under the final filter a fork still traps as clone: its trap wins over EPERM") {
  SandboxPolicy relaxed;
  relaxed.profile = SeccompProfile::kRelaxed;
  ChildResult r = run_sandboxed(
      relaxed, [] { return fork_works() ? 1 : 2; },
      [&] {
        if (!set_no_new_privs() || !install_init_seccomp(relaxed)) ::_exit(10);
      });
  INFO(r.describe());
  CHECK(r.exited_with(kExitViolation));
  CHECK(syscall_name(static_cast<int>(r.violation) - 1) == "clone");
}

TEST_CASE("init that left no process passes, and a child that already exited is reaped") {
  ChildResult r = run_sandboxed(no_final_filter(), [] {
    if (!become_child_subreaper()) return 10;
    if (!end_init_children()) return 1;
    const pid_t quick = ::fork();
    if (quick == 0) ::_exit(0);
    siginfo_t info{};
    ::waitid(P_PID, static_cast<id_t>(quick), &info, WEXITED | WNOWAIT);  // a zombie now
    if (!end_init_children()) return 2;
    if (::kill(quick, 0) == 0 || errno != ESRCH) return 3;  // reaped
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a process init left running is killed and named") {
  ChildResult r = run_sandboxed(no_final_filter(), [] {
    if (!become_child_subreaper()) return 10;
    const pid_t child = paused_child();
    const sandpool::Status s = end_init_children();
    if (s || s.code() != sandpool::Code::kPlugin) return 1;
    const std::string expected =
        "init left 1 process(es) running (pid " + std::to_string(child) + "), now killed";
    if (s.message() != expected) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 2;
    }
    if (::kill(child, 0) == 0 || errno != ESRCH) return 3;  // killed and reaped
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}

TEST_CASE("a process init orphaned (a double fork) comes back to the worker and is killed") {
  ChildResult r = run_sandboxed(no_final_filter(), [] {
    if (!become_child_subreaper()) return 10;
    int fds[2];
    if (::pipe(fds) != 0) return 11;
    const pid_t middle = ::fork();
    if (middle == 0) {
      const pid_t grandchild = paused_child();
      if (::write(fds[1], &grandchild, sizeof grandchild) != sizeof grandchild) ::_exit(1);
      ::_exit(0);  // the grandchild is an orphan now: ours, as the subreaper
    }
    pid_t grandchild = 0;
    if (::read(fds[0], &grandchild, sizeof grandchild) != sizeof grandchild) return 12;
    siginfo_t info{};
    ::waitid(P_PID, static_cast<id_t>(middle), &info, WEXITED | WNOWAIT);  // gone, unreaped
    const sandpool::Status s = end_init_children();
    if (s || s.message() != "init left 1 process(es) running (pid " + std::to_string(grandchild) +
                                "), now killed") {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    if (::kill(grandchild, 0) == 0 || errno != ESRCH) return 2;
    if (::kill(middle, 0) == 0 || errno != ESRCH) return 3;
    return 0;
  });
  INFO(r.describe());
  CHECK(r.exited_with(0));
}
