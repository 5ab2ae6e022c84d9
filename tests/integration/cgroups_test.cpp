// Per-worker cgroups on this machine's real controllers (cgroup v1 here and in CI; v2 is
// covered by the fake trees in tests/manager/cgroups_test.cpp), with real workers, as root.
// A case skips (ctest's SKIP_RETURN_CODE), saying why, only when the host lacks the
// controllers or the rights as a probe of its own finds (host_probe.hpp); where that probe
// finds them, sandpool must find them too.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "host_probe.hpp"
#include "supervision/cgroup_layout.hpp"
#include "supervision/worker_cgroups.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

namespace fs = std::filesystem;

// The layout this process sees. Skips the test when the host cannot give workers cgroups;
// fails it when it can but sandpool finds otherwise.
supervision::CgroupLayout usable_layout() {
  sandpool::testing::require_worker_cgroups();
  auto tree = supervision::CgroupTree::system();
  INFO("CgroupTree::system(): " << tree.status().to_string());
  REQUIRE(tree);
  supervision::PosixCgroupFs posix;
  auto sources = supervision::read_cgroup_sources(posix);
  REQUIRE(sources);
  auto layout = supervision::detect_cgroup_layout(*sources, posix);
  REQUIRE(layout);
  return *layout;
}

// This process's parent cgroup in each hierarchy a worker uses.
std::vector<std::string> parents(const supervision::CgroupLayout& l) {
  const std::string name = "sandpool-" + std::to_string(::getpid());
  if (l.version == supervision::CgroupVersion::kV2) return {l.unified_dir + "/" + name};
  return {l.v1_dirs.at("memory") + "/" + name, l.v1_dirs.at("pids") + "/" + name};
}

PoolOptions cgroup_pool(const std::string& plugin_path, const std::string& name) {
  PoolOptions o = pool_options("echo", 1);
  o.name = name;
  o.plugin_path = plugin_path;
  o.sandbox.cgroup = sandbox::CgroupMode::kRequired;
  o.retries = 0;
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// True iff the process is gone or a zombie (killed, waiting for whoever adopted it).
bool dead(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const std::size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

}  // namespace

TEST_CASE("a worker is in its memory and pids cgroups before its plugin's init runs") {
  const supervision::CgroupLayout layout = usable_layout();
  PoolOptions o = cgroup_pool(SANDPOOL_TEST_PLUGIN_DIR "/libcgroup_probe.so", "probe");
  const bool v1_cpu =
      layout.version == supervision::CgroupVersion::kV1 && layout.v1_dirs.count("cpu") != 0;
  if (v1_cpu) o.sandbox.cpu_quota = 0.5;
  auto pool = make_pool(o);
  const std::string expected = "+cgroup:" + std::string(supervision::to_string(layout.version));
  CHECK(pool->isolation() == "rlimits+seccomp:strict" + expected);

  auto r = run(*pool, "cgroup_probe", "");
  REQUIRE(r.state == TaskState::kCompleted);
  const std::string seen = r.result;
  INFO(seen);
  const std::string mine = "/sandpool-" + std::to_string(::getpid()) + "/probe-";
  if (layout.version == supervision::CgroupVersion::kV1) {
    std::vector<std::string> controllers = {":memory:", ":pids:"};
    if (v1_cpu) controllers.push_back(":cpu:");
    for (const std::string& controller : controllers) {
      const std::size_t line = seen.find(controller);
      REQUIRE(line != std::string::npos);
      CHECK(seen.substr(line, seen.find('\n', line) - line).find(mine) != std::string::npos);
    }
    if (v1_cpu) {
      const std::string cpu_parent =
          layout.v1_dirs.at("cpu") + "/sandpool-" + std::to_string(::getpid());
      for (const fs::directory_entry& e : fs::directory_iterator(cpu_parent)) {
        if (e.is_directory()) CHECK(slurp(e.path().string() + "/cpu.cfs_quota_us") == "50000\n");
      }
    }
  } else {
    CHECK(seen.find("0::") != std::string::npos);
    CHECK(seen.find(mine) != std::string::npos);
  }
  CHECK(seen.find("oom_score_adj 1000") != std::string::npos);

  // The cgroup holds the worker while it lives, and goes with the pool.
  const std::vector<WorkerInfo> workers = pool->workers();
  REQUIRE(workers.size() == 1);
  const std::vector<std::string> dirs = parents(layout);
  for (const std::string& d : dirs) CHECK(fs::exists(d));
  pool->close();
  pool.reset();
  for (const std::string& d : dirs) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("a memory hog under a cgroup memory limit is OOM-killed: resource_limit: memory") {
  const supervision::CgroupLayout layout = usable_layout();
  PoolOptions o = cgroup_pool(sandpool::testing::plugin("alloc"), "hog");
  o.sandbox.limits.address_space = 64ull << 20;
  auto pool = make_pool(o);
  // With the cgroup, RLIMIT_AS is not set: the allocations succeed and touching them is
  // what exceeds the limit, so the kernel's OOM killer, not malloc, ends the worker.
  auto r = run(*pool, "alloc", "512");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error.rfind("resource_limit: memory (cgroup memory limit", 0) == 0);
  // What fits still runs, on the replacement, in a cgroup of its own.
  CHECK(run(*pool, "alloc", "8").state == TaskState::kCompleted);
  const std::vector<std::string> dirs = parents(layout);
  pool.reset();
  for (const std::string& d : dirs) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("a fork bomb is contained by pids.max, and its processes die with the pool") {
  const supervision::CgroupLayout layout = usable_layout();
  PoolOptions o = cgroup_pool(SANDPOOL_TEST_PLUGIN_DIR "/libfork_bomb.so", "bomb");
  o.sandbox.limits.processes = 16;
  o.sandbox.allow_syscalls = {"fork"};
  auto pool = make_pool(o);
  auto r = run(*pool, "fork_bomb", "");
  REQUIRE(r.state == TaskState::kCompleted);
  INFO(r.result);
  REQUIRE(r.result.rfind("forked ", 0) == 0);
  const long forked = std::stol(r.result.substr(7));
  CHECK(forked >= 1);
  CHECK(forked < 16);  // the worker itself counts against pids.max
  CHECK(r.result.find("EAGAIN") != std::string::npos);

  // Every fork is still there, in the worker's cgroup, until the pool goes.
  const std::vector<std::string> dirs = parents(layout);
  std::vector<pid_t> inside;
  for (const fs::directory_entry& e : fs::directory_iterator(dirs.back())) {
    if (!e.is_directory()) continue;
    for (pid_t p : supervision::parse_pids(slurp(e.path().string() + "/cgroup.procs"))) {
      inside.push_back(p);
    }
  }
  CHECK(inside.size() == static_cast<std::size_t>(forked) + 1);
  pool.reset();
  for (pid_t p : inside) CHECK(dead(p));
  for (const std::string& d : dirs) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("a CPU quota without per-worker cgroups refuses to start instead of being ignored") {
  PoolOptions o = cgroup_pool(SANDPOOL_TEST_PLUGIN_DIR "/libcgroup_probe.so", "quota");
  o.sandbox.cgroup = sandbox::CgroupMode::kOff;
  o.sandbox.cpu_quota = 0.5;
  auto p = Pool::create(o);
  REQUIRE_FALSE(p);
  CHECK(p.status().message().find("cpu_quota needs per-worker cgroups") != std::string::npos);
}

TEST_CASE("a reconfigure that changes a cgroup limit replaces the workers made with the old one") {
  const supervision::CgroupLayout layout = usable_layout();
  PoolOptions o = cgroup_pool(sandpool::testing::plugin("echo"), "relimit");
  o.sandbox.limits.address_space = 256ull << 20;
  auto pool = make_pool(o);
  const std::vector<WorkerInfo> before = pool->workers();
  REQUIRE(before.size() == 1);

  PoolOptions next = o;
  next.sandbox.limits.address_space = 300ull << 20;  // a multiple of the page size
  auto applied = pool->reconfigure(next);
  REQUIRE(applied);
  CHECK(applied->rolling_restart);

  // The replacement is ready and serving, in a cgroup made with the new limit.
  REQUIRE(run(*pool, "echo", "hi").state == TaskState::kCompleted);
  pid_t fresh = 0;
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (fresh == 0 && std::chrono::steady_clock::now() < until) {
    for (const WorkerInfo& w : pool->workers()) {
      if (w.pid != before[0].pid && w.state == "idle") fresh = w.pid;
    }
    if (fresh == 0) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(fresh != 0);
  const std::string limit_file =
      layout.version == supervision::CgroupVersion::kV2 ? "/memory.max" : "/memory.limit_in_bytes";
  std::string limit;
  for (const fs::directory_entry& e : fs::directory_iterator(parents(layout).front())) {
    if (!e.is_directory()) continue;
    for (pid_t p : supervision::parse_pids(slurp(e.path().string() + "/cgroup.procs"))) {
      if (p == fresh) limit = slurp(e.path().string() + limit_file);
    }
  }
  CHECK(limit == std::to_string(300ull << 20) + "\n");
}
