// Doors of the namespace sandbox, with real processes: /proc without a pid namespace,
// and a worker whose manager dies before the worker's lock-down step 1, in every namespace
// combination. A combination the kernel refuses ends the test as skipped (exit code 77).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sandpool/base/pidfd.hpp>
#include <sandpool/pool/spawner.hpp>
#include <sandpool/sandbox/worker_args.hpp>

#include "supervision/worker_process.hpp"
#include "test_support.hpp"

using namespace sandpool;
using sandbox::Namespace;
using sandbox::NamespaceSet;
using sandpool::testing::kPatience;

namespace {

const std::string kGapProbePlugin = std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/libns_probe.so";

NamespaceSet set_of(std::initializer_list<Namespace> list) {
  NamespaceSet s;
  for (Namespace ns : list) s.add(ns);
  return s;
}

// Ends the test as skipped unless this process may create every namespace of `wanted`.
void require_namespaces(NamespaceSet wanted) {
  std::string why;
  if (probe_namespaces(wanted, &why) == wanted) return;
  std::fprintf(stderr, "skipped: the kernel refuses namespaces here: %s\n", why.c_str());
  std::exit(77);
}

std::string gap_probe(Pool& pool, const std::string& cmd) {
  TaskResult r = sandpool::testing::run(pool, "probe", cmd);
  REQUIRE(r.state == TaskState::kCompleted);
  return r.result;
}

// Waits (kPatience at most) until `fd` is readable; returns false on timeout.
bool readable_within(int fd, std::chrono::milliseconds bound) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(bound.count())) > 0;
}

// The spawner of a stand-in manager: adds a placement gate that the test, not the manager,
// opens (so the worker waits before lock-down step 1 for as long as the test wants), sends
// the worker's stdout and stderr to the test's stderr (a pipe to a dead manager would end
// the worker by SIGPIPE, not by its own checks), and reports the worker's pid to the test.
class GatedSpawner final : public Spawner {
 public:
  GatedSpawner(std::shared_ptr<Spawner> inner, int gate_fd, int report_fd)
      : inner_(std::move(inner)), gate_fd_(gate_fd), report_fd_(report_fd) {}
  Result<ChildProcess> spawn(const SpawnRequest& request) override {
    SpawnRequest r = request;
    int next = 0;
    for (auto& mapped : r.fds) {
      next = std::max(next, mapped.first + 1);
      if (mapped.first == 1 || mapped.first == 2) mapped.second = STDERR_FILENO;
    }
    r.fds.emplace_back(next, gate_fd_);
    r.args.push_back("--gate-fd");
    r.args.push_back(std::to_string(next));
    auto child = inner_->spawn(r);
    if (child) {
      const pid_t pid = child->pid();
      if (::write(report_fd_, &pid, sizeof pid) != sizeof pid) ::_exit(3);
    }
    return child;
  }

 private:
  std::shared_ptr<Spawner> inner_;
  int gate_fd_, report_fd_;
};

// The stand-in manager's life: it spawns one worker (held at the test's gate), reports its
// pid, and waits to be killed. Never returns.
[[noreturn]] void stand_in_manager(NamespaceSet namespaces, int gate_fd, int report_fd) {
  std::shared_ptr<Spawner> spawner;
  if (namespaces.empty()) {
    spawner = make_process_spawner();
  } else {
    Clone3SpawnerOptions so;
    so.namespaces.wanted = namespaces;
    spawner = make_clone3_spawner(so);
  }
  GatedSpawner gated(spawner, gate_fd, report_fd);
  supervision::LaunchSpec spec;
  spec.worker_path = SANDPOOL_WORKER_PATH;
  spec.args.plugin_path = kGapProbePlugin;
  spec.args.parent_pid = ::getpid();
  auto worker = supervision::WorkerProcess::start(gated, spec);
  if (!worker) {
    std::fprintf(stderr, "stand-in manager: %s\n", worker.status().message().c_str());
    ::_exit(2);
  }
  for (;;) ::pause();
}

}  // namespace

TEST_CASE("without a pid namespace the worker's /proc shows its own process, not the host's") {
  const NamespaceSet wanted =
      GENERATE(set_of({Namespace::kMount}), set_of({Namespace::kUser, Namespace::kMount}),
               set_of({Namespace::kUser, Namespace::kMount, Namespace::kNet, Namespace::kIpc,
                       Namespace::kUts}));
  require_namespaces(wanted);
  PoolOptions o;
  o.name = "test-proc";
  o.plugin_path = kGapProbePlugin;
  o.worker_path = SANDPOOL_WORKER_PATH;
  o.workers = 1;
  o.sandbox.profile = sandbox::SeccompProfile::kOff;  // the probe opens files
  o.sandbox.namespaces.wanted = wanted;
  auto pool = sandpool::testing::make_pool(o);
  const std::string pid = gap_probe(*pool, "pid");
  CHECK(pid == std::to_string(pool->workers().at(0).pid));  // the host's pid: no pid namespace
  // Its own entry, through /proc/self; no other process's: not the host's init, not the
  // manager (absent, not merely refused: Landlock alone would answer EACCES).
  CHECK(gap_probe(*pool, "read /proc/self/comm").rfind("read:sandpool-work", 0) == 0);
  CHECK(gap_probe(*pool, "read /proc/" + pid + "/comm").rfind("read:sandpool-work", 0) == 0);
  const std::string absent = "error:" + std::to_string(ENOENT);
  CHECK(gap_probe(*pool, "read /proc/1/comm") == absent);
  CHECK(gap_probe(*pool, "read /proc/" + std::to_string(::getpid()) + "/status") == absent);
  CHECK(gap_probe(*pool, "read /proc/meminfo") == absent);
}

TEST_CASE("a worker whose manager died before its lock-down step 1 never runs, in any namespaces") {
  const NamespaceSet namespaces =
      GENERATE(NamespaceSet{}, set_of({Namespace::kPid}), set_of({Namespace::kUser}),
               set_of({Namespace::kUser, Namespace::kPid}));
  require_namespaces(namespaces);
  INFO("namespaces: " << (namespaces.empty() ? "none" : namespaces.describe(",")));
  // Orphans come to the test, which can then wait for the worker like its parent would.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int gate[2], report[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate) == 0);
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  const pid_t manager = ::fork();
  REQUIRE(manager >= 0);
  if (manager == 0) stand_in_manager(namespaces, gate[0], report[1]);
  ::close(report[1]);
  ::close(gate[0]);

  pid_t worker = 0;
  const bool reported = readable_within(report[0], kPatience) &&
                        ::read(report[0], &worker, sizeof worker) == sizeof worker;
  ::close(report[0]);
  ::kill(manager, SIGKILL);
  int manager_status = 0;
  REQUIRE(::waitpid(manager, &manager_status, 0) == manager);
  REQUIRE(reported);
  // The manager is gone and reaped; only now may the worker go on to step 1.
  const int worker_fd = pidfd_open(worker);
  REQUIRE(worker_fd >= 0);
  (void)::send(gate[1], "1", 1, MSG_NOSIGNAL);
  ::close(gate[1]);
  const bool ended = readable_within(worker_fd, kPatience);
  ::close(worker_fd);
  if (!ended) ::kill(worker, SIGKILL);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(worker), &info, WEXITED) == 0);
  REQUIRE(ended);
  // Killed by its parent-death signal (still set from before exec), or stopped by its own
  // check at step 1: either way before its plugin was loaded.
  const bool by_death_signal = info.si_code == CLD_KILLED && info.si_status == SIGKILL;
  const bool by_step_1 = info.si_code == CLD_EXITED && info.si_status == sandbox::kExitLockdown;
  INFO("si_code " << info.si_code << " si_status " << info.si_status);
  CHECK((by_death_signal || by_step_1));
}
