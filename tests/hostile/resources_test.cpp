// Hostile plugins that go after resources: memory, processes, threads, CPU, time, the stack,
// the file-size limit, or simply die mid-task. Each case: the attack's outcome, ordinary
// tasks beside it complete, both pools still serve, nothing is left behind.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "host_cgroups.hpp"
#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::integration_plugin;

namespace {

// The number at the end of "<words> after N".
int count_after(const std::string& error) {
  const auto at = error.rfind(' ');
  return at == std::string::npos ? -1 : std::atoi(error.c_str() + at + 1);
}

bool has_worker(Pool& pool, std::int32_t pid) {
  const auto ws = pool.workers();
  return std::any_of(ws.begin(), ws.end(), [&](const WorkerInfo& w) { return w.pid == pid; });
}

// The pids cgroup of a worker, read while it lives (v1's pids hierarchy, else v2's).
struct PidsCount {
  std::string dir;
  long long current = -1, max = -1;
  long long refused = -1;  // pids.events "max": forks and clones the limit refused
  int worker_threads = -1;
};

PidsCount pids_of(std::int32_t worker) {
  PidsCount c;
  c.dir = hostile::cgroup_dir_of(worker, "pids");
  if (c.dir.empty()) c.dir = hostile::cgroup_dir_of(worker, "");
  REQUIRE_FALSE(c.dir.empty());
  c.current = hostile::cgroup_value(c.dir + "/pids.current");
  c.max = hostile::cgroup_value(c.dir + "/pids.max");
  c.refused = hostile::cgroup_value(c.dir + "/pids.events", "max");
  std::ifstream status("/proc/" + std::to_string(worker) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) c.worker_threads = std::atoi(line.c_str() + 8);
  }
  return c;
}

// Runs an ordinary echo on `pool`; returns the pid of the worker that completed it.
std::int32_t echo_served_by(Pool& pool) {
  auto t = pool.submit("echo", "served");
  REQUIRE(t);
  REQUIRE(t->wait_for(sandpool::testing::kPatience));
  const TaskResult r = t->wait();
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "served");
  return r.history.back().worker_pid;
}

}  // namespace

TEST_CASE("allocating until stopped ends as resource_limit: memory") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.limits.address_space = 256ull << 20;  // less to touch on a loaded machine
  world.start(o);
  const TaskResult r = world.attack("alloc_forever", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error.rfind("resource_limit: memory", 0) == 0);
  world.close_and_check_clean();
}

TEST_CASE("reserving 64 GiB without touching it harms nobody") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("reserve_64g", "");
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  // Under the address-space limit (on in hostile_options()) the reservation is refused;
  // under a cgroup memory limit alone it would succeed ("reserved") and cost nothing, since
  // nothing is touched: the worker would live on all the same.
  CHECK(r.result == "refused");
  CHECK(has_worker(world.pool(), r.history[0].worker_pid));  // the worker lives on
  world.close_and_check_clean();
}

TEST_CASE("a fork bomb is stopped at its first fork, as a sandbox_violation") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;  // threads yes, processes no
  world.start(o);
  const TaskResult r = world.attack("fork_bomb", "");
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: clone");
  world.close_and_check_clean();
}

// A pool that allows fork (allow_syscalls: [clone]) relies on pids.max to hold the bomb,
// and on the cgroup's teardown to take the children with the worker: without a pid
// namespace they outlive it, orphans of the nearest subreaper (here the test). As root
// RLIMIT_NPROC does not bind the manager, so without the cgroup this would be a real fork
// bomb (the plugin stops at 4096 children): start_with_cgroups() skips the case instead.
TEST_CASE("a fork bomb in a pool that allows fork is held by pids.max", "[needs-cgroup]") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  o.sandbox.allow_syscalls = {"clone"};
  o.sandbox.limits.processes = 32;
  o.workers = 1;  // so what runs after the bomb runs on the bomb's worker
  world.start_with_cgroups(o);
  const TaskResult r = world.attack("fork_bomb", "");
  REQUIRE(r.attempts() == 1);
  const Attempt& a = r.history[0];
  INFO(a.error);
  CHECK(a.outcome == Outcome::kFailed);
  REQUIRE(a.error.rfind("fork refused after ", 0) == 0);
  const PidsCount pids = pids_of(a.worker_pid);
  INFO("the worker's pids cgroup " << pids.dir << ": current " << pids.current << ", max "
                                   << pids.max << ", refused " << pids.refused);
  // pids.max refused it: the worker's threads and the children fill the cgroup to the brim.
  CHECK(pids.max == 32);
  CHECK(pids.refused >= 1);
  CHECK(pids.current == 32);
  CHECK(count_after(a.error) + pids.worker_threads == 32);
  // The worker lives on, its children with it, and serves; at close they go with it.
  CHECK(echo_served_by(world.pool()) == a.worker_pid);
  world.close_and_check_clean();
}

TEST_CASE("a thread bomb is refused more threads long before it hurts") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  // No RLIMIT_NPROC: it counts every task of the workers' user on the host, so other tests'
  // workers would decide when it binds. The address space alone stops this bomb.
  o.sandbox.limits.processes = 0;
  world.start(o);
  const TaskResult r = world.attack("thread_bomb", "");
  REQUIRE(r.attempts() == 1);
  const Attempt& a = r.history[0];
  INFO(a.error);
  // The 8 MiB stacks exhaust the 512 MiB address space first: the host sees the limit
  // reached after the failed handle and reports memory, not the plugin's SP_FAIL, and leaves.
  CHECK(a.outcome == Outcome::kResourceLimit);
  CHECK(a.error.rfind("resource_limit: memory", 0) == 0);
  world.close_and_check_clean();
}

// With a cgroup the memory limit is the cgroup's, which counts what is touched (a thread's
// stack hardly is), and RLIMIT_AS is off: pids.max is what stops the bomb. pthread_create
// answers EAGAIN, the plugin gives up with SP_FAIL, and the worker, not out of anything it
// needs, lives on and serves.
TEST_CASE("a thread bomb in a pool with a cgroup is held by pids.max", "[needs-cgroup]") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  o.sandbox.limits.processes = 64;
  o.sandbox.limits.address_space = 1ull << 30;  // the cgroup's memory.limit_in_bytes
  o.workers = 1;  // so what runs after the bomb runs on the bomb's worker
  world.start_with_cgroups(o);
  const TaskResult r = world.attack("thread_bomb", "");
  REQUIRE(r.attempts() == 1);
  const Attempt& a = r.history[0];
  INFO(a.error);
  CHECK(a.outcome == Outcome::kFailed);
  REQUIRE(a.error.rfind("threads refused after ", 0) == 0);
  const PidsCount pids = pids_of(a.worker_pid);
  INFO("the worker's pids cgroup " << pids.dir << ": current " << pids.current << ", max "
                                   << pids.max << ", refused " << pids.refused);
  CHECK(pids.max == 64);
  CHECK(pids.refused >= 1);
  CHECK(pids.current == 64);
  // Every task in the cgroup is one of the worker's threads, the bomb's among them.
  CHECK(pids.worker_threads == 64);
  CHECK(count_after(a.error) < 64);
  CHECK(echo_served_by(world.pool()) == a.worker_pid);  // its threads still asleep in it
  world.close_and_check_clean();
}

TEST_CASE("a busy loop without heartbeats past the CPU limit is resource_limit: cpu") {
  HostileWorld world;
  PoolOptions o = hostile_options(integration_plugin("hang"));
  o.cpu_time = 300ms;
  o.timeout = 60s;  // the CPU limit must be what stops it
  world.start(o);
  const TaskResult r = world.attack("hang", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error.rfind("resource_limit: cpu", 0) == 0);
  world.close_and_check_clean();
}

TEST_CASE("an infinite sleep that ignores cancellation times out") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.timeout = 300ms;
  world.start(o);
  SubmitOptions so;
  so.timeout = 300ms;
  const TaskResult r = world.attack("sleep_forever", "", so);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  CHECK(r.state == TaskState::kDeadLettered);
  world.close_and_check_clean();
}

TEST_CASE("a stack overflow loses the attempt to SIGSEGV") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("stack_overflow", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("SIGSEGV") != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("abort() loses the attempt to SIGABRT") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("abort", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("SIGABRT") != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("exit(0) in the middle of a task is lost, not a success") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("exit_mid_task", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("exited with code 0") != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("writing past the file-size limit is resource_limit: file_size") {
  // The file is the test's, opened by the plugin's init (before seccomp, and declared as
  // sandbox.init.write_paths for init's Landlock); handle appends to it for ever. World-writable,
  // for a worker that runs as another user.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("sandpool-hostile-fsize-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "grows";
  { std::ofstream(file).flush(); }
  ::chmod(dir.c_str(), 0755);
  ::chmod(file.c_str(), 0666);
  {
    HostileWorld world;
    PoolOptions o = hostile_options();
    o.sandbox.limits.file_size = 1u << 20;
    o.plugin_config_json = "{\"write_path\": \"" + file.string() + "\"}";
    o.sandbox.init.write_paths = {file.string()};  // what init opens for writing
    world.start(o);
    const TaskResult r = world.attack("write_file", "");
    REQUIRE(r.attempts() == 1);
    INFO(r.history[0].error);
    CHECK(r.history[0].outcome == Outcome::kResourceLimit);
    CHECK(r.history[0].error.rfind("resource_limit: file_size", 0) == 0);
    CHECK(std::filesystem::file_size(file) <= (1u << 20));
    world.close_and_check_clean();
  }
  std::filesystem::remove_all(dir);
}
