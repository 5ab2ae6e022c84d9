// The real sandpool-worker's start-up and sandbox: refused plugins, the seccomp reporter,
// per-pool additions, rlimits, the init deadline and the parent-death signal.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::ipc::TaskStatus;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;

namespace {

bool sandboxed_exited_with(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

std::string describe(const std::optional<int>& status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exit " + std::to_string(WEXITSTATUS(*status));
  return "signal " + std::to_string(WTERMSIG(*status));
}

}  // namespace

TEST_CASE("a plugin the loader refuses exits with the right code and an error LogMsg") {
  struct Case {
    std::string plugin;
    std::string config;
    int exit_code;
    std::string needle;
  };
  const Case c = GENERATE(
      Case{test_plugin_path("missing_handle"), "{}", sandbox::kExitLoad,
           "lacks required symbol 'sp_plugin_handle'"},
      Case{test_plugin_path("abi_v2"), "{}", sandbox::kExitLoad,
           "reports ABI version 2; this host implements ABI version 1"},
      Case{test_plugin_path("init_fails"), "{}", sandbox::kExitInit, "returned 7"},
      Case{test_plugin_path("abi_probe"), R"({"mode":"fail"})", sandbox::kExitInit, "returned 5"});
  sandbox::WorkerArgs args = worker_args(c.plugin);
  args.plugin_config_json = c.config;
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(describe(status) + "; output: " + w->output());
  CHECK(sandboxed_exited_with(status, c.exit_code));
  CHECK(w->late_messages().empty());  // no ReadyMsg
  CHECK(w->header().phase.load() == static_cast<std::uint32_t>(ipc::WorkerPhase::kStarting));
  REQUIRE_FALSE(w->logs().empty());
  const ipc::LogMsg& last = w->logs().back();
  CHECK(last.level == 3);
  CHECK(last.text.find(c.needle) != std::string::npos);
  CHECK(w->output().find(c.needle) != std::string::npos);  // and on stderr
}

TEST_CASE("a failing init's own explanation reaches the manager before the failure") {
  auto w = WorkerHarness::spawn(worker_args(test_plugin_path("init_fails")));
  auto status = w->wait_exit();
  CHECK(sandboxed_exited_with(status, sandbox::kExitInit));
  CHECK(w->logged("init_fails: refusing to start: no model configured"));
}

TEST_CASE("a plugin that hangs in init is stopped by the worker's own deadline") {
  sandbox::WorkerArgs args = worker_args(test_plugin_path("abi_probe"));
  args.plugin_config_json = R"({"mode":"hang"})";
  args.init_timeout_ms = 300;
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(sandboxed_exited_with(status, sandbox::kExitInit));
  CHECK(w->output().find("did not finish within 300 ms") != std::string::npos);
}

TEST_CASE("a forbidden syscall in handle ends the worker with kExitViolation, naming it") {
  const sandbox::SeccompProfile profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  sandbox::WorkerArgs args = worker_args(test_plugin_path("forbidden_syscall"));
  args.policy.profile = profile;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(1, "socket", ""));
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(sandboxed_exited_with(status, sandbox::kExitViolation));
  CHECK(w->header().violation_syscall.load() == SYS_socket + 1);
  CHECK(w->header().started_task.load() == 1);
  CHECK(sandbox::syscall_name(static_cast<int>(w->header().violation_syscall.load()) - 1) ==
        "socket");
  CHECK(w->output().find("forbidden syscall " + std::to_string(SYS_socket)) != std::string::npos);
}

TEST_CASE("a pool's allow_syscalls reach the worker's filter") {
  sandbox::WorkerArgs args = worker_args(test_plugin_path("forbidden_syscall"));
  args.policy.allow_syscalls = {"socket"};
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(1, "socket", ""));
  auto r = w->next_result();
  INFO(w->output());
  REQUIRE(r.has_value());
  CHECK(r->status == TaskStatus::kOk);
  CHECK(r->data == "socket allowed");
}

TEST_CASE("an unknown syscall in allow_syscalls fails the lock-down, naming it") {
  sandbox::WorkerArgs args = worker_args(plugin_path("echo"));
  args.policy.allow_syscalls = {"no_such_syscall"};
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(sandboxed_exited_with(status, sandbox::kExitLockdown));
  CHECK(w->logged("lock-down step 7 (seccomp): allow_syscalls: unknown syscall 'no_such_syscall'"));
}

TEST_CASE("the off profile runs unfiltered and says so loudly") {
  sandbox::WorkerArgs args = worker_args(test_plugin_path("forbidden_syscall"));
  args.policy.profile = sandbox::SeccompProfile::kOff;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  CHECK(w->logged("SECCOMP IS OFF"));
  w->send(w->task(1, "socket", ""));
  auto r = w->next_result();
  REQUIRE(r.has_value());
  CHECK(r->status == TaskStatus::kOk);
}

TEST_CASE("the address-space limit applies to the plugin") {
  sandbox::WorkerArgs args = worker_args(plugin_path("alloc"));
  args.policy.limits.address_space = 512ull << 20;
  auto w = WorkerHarness::spawn(args);
  REQUIRE(w->expect_ready().has_value());
  w->send(w->task(1, "alloc", "16"));
  auto fits = w->next_result();
  REQUIRE(fits.has_value());
  CHECK(fits->status == TaskStatus::kOk);
  CHECK(fits->data == "allocated 16 MiB, holding 16 MiB");
  // Past it: memory_reporter_test.cpp.
}

TEST_CASE("the worker dies with its parent (PR_SET_PDEATHSIG)") {
  // This process adopts the orphaned worker, so it can see how the worker ended.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int pid_pipe[2], go_pipe[2];
  REQUIRE(::pipe(pid_pipe) == 0);
  REQUIRE(::pipe(go_pipe) == 0);
  const pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    // The intermediate "manager": spawns the worker, reports its pid once it is ready,
    // then dies when told to, without cleaning up.
    auto w = WorkerHarness::spawn(worker_args(plugin_path("echo")));
    pid_t pid = w->expect_ready() ? w->pid() : -1;
    if (::write(pid_pipe[1], &pid, sizeof pid) != sizeof pid) ::_exit(1);
    char go;
    if (::read(go_pipe[0], &go, 1) != 1) ::_exit(1);
    ::_exit(0);
  }
  pid_t worker = -1;
  REQUIRE(::read(pid_pipe[0], &worker, sizeof worker) == sizeof worker);
  REQUIRE(worker > 0);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, worker, 0));
  REQUIRE(pidfd >= 0);
  pollfd p{pidfd, POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0);  // alive while its parent is

  REQUIRE(::write(go_pipe[1], "x", 1) == 1);
  int middle_status = 0;
  REQUIRE(::waitpid(middle, &middle_status, 0) == middle);
  CHECK(::poll(&p, 1, static_cast<int>(testing::kGenerous.count())) == 1);
  siginfo_t info{};
  REQUIRE(::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) == 0);
  CHECK(info.si_code == CLD_KILLED);
  CHECK(info.si_status == SIGKILL);
  ::close(pidfd);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_CASE("a worker whose manager is no longer its parent refuses to start") {
  // --parent-pid names a process that is not the parent: as if the manager had died and
  // the worker had been re-parented before step 1.
  sandbox::WorkerArgs args = worker_args(plugin_path("echo"));
  args.parent_pid = 1;
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == sandbox::kExitLockdown);
  CHECK(w->output().find("not the spawning manager") != std::string::npos);
}

TEST_CASE("a bad command line exits with kExitUsage and says what was wrong") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], STDERR_FILENO);
    ::execl(SANDPOOL_WORKER_PATH, SANDPOOL_WORKER_PATH, "--plugin", "/x.so", "--bogus", "1",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO(text);
  CHECK(sandboxed_exited_with(status, sandbox::kExitUsage));
  CHECK(text.find("unknown flag '--bogus'") != std::string::npos);
}
