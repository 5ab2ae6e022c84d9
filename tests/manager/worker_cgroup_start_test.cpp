// WorkerProcess::start with per-worker cgroups, on fake cgroup trees and a spawner that only
// records what it was asked: the gate on v1 (and on v2 without CLONE_INTO_CGROUP), the
// cgroup fd instead of a gate when the spawner can start the child inside it, and a worker
// that cannot be placed.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "fake_cgroup_tree.hpp"
#include "supervision/worker_process.hpp"

using namespace sandpool;
using namespace sandpool::supervision;
using sandpool::testing::FakeCgroupKernel;
using sandpool::testing::ScratchDir;

namespace {

constexpr pid_t kChildPid = 4321;

// Records the request and keeps a copy of every fd mapped (the one mapped to 5 is the gate) so
// the test can look at them, and read what the manager sends the "child". Returns a ChildProcess
// with no pidfd (nothing to kill).
class GateRecordingSpawner final : public Spawner {
 public:
  explicit GateRecordingSpawner(bool into_cgroup) : into_cgroup_(into_cgroup) {}
  Result<ChildProcess> spawn(const SpawnRequest& req) override {
    request = req;
    for (auto [child_fd, parent_fd] : req.fds) {
      if (child_fd == 5) gate.reset(::fcntl(parent_fd, F_DUPFD_CLOEXEC, 0));
      copies[child_fd] = UniqueFd(::fcntl(parent_fd, F_DUPFD_CLOEXEC, 0));
    }
    if (req.into_cgroup_fd >= 0) {
      char buf[4096];
      const std::string link = "/proc/self/fd/" + std::to_string(req.into_cgroup_fd);
      const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
      if (n > 0) into_cgroup_path.assign(buf, static_cast<std::size_t>(n));
    }
    return ChildProcess(kChildPid, UniqueFd());
  }
  bool places_into_cgroup() const override { return into_cgroup_; }

  SpawnRequest request;
  UniqueFd gate;
  std::map<int, UniqueFd> copies;  // by child fd: what the child would have had
  std::string into_cgroup_path;

 private:
  bool into_cgroup_;
};

bool request_has_arg(const SpawnRequest& r, const std::string& a) {
  return std::find(r.args.begin(), r.args.end(), a) != r.args.end();
}

// A v1 tree (memory and pids hierarchies) in a scratch directory.
struct V1Tree {
  ScratchDir dir;
  std::shared_ptr<FakeCgroupKernel> kernel = std::make_shared<FakeCgroupKernel>(CgroupVersion::kV1);
  std::shared_ptr<CgroupTree> tree;
  V1Tree() {
    kernel->root = dir.path;
    CgroupLayout l;
    l.version = CgroupVersion::kV1;
    for (const char* c : {"memory", "pids"}) {
      const std::string d = dir.path + "/sys/fs/cgroup/" + c;
      std::filesystem::create_directories(d);
      FakeCgroupKernel::touch(d + "/cgroup.procs", "");
      l.v1_dirs[c] = d;
    }
    auto t = CgroupTree::open(kernel, l, "sandpool-1");
    REQUIRE(t);
    tree = *t;
  }
};

LaunchSpec spec_with(std::shared_ptr<CgroupTree> tree) {
  LaunchSpec spec;
  // start() opens both (the spawner is a recorder: nothing runs): any file stands for them.
  spec.worker_path = "/bin/true";
  spec.args.plugin_path = "/bin/true";
  spec.cgroups = std::move(tree);
  spec.cgroup_limits.memory_bytes = 64u << 20;
  spec.pool_name = "p";
  return spec;
}

}  // namespace

TEST_CASE("v1: the worker waits at the gate until its pid is in every cgroup") {
  V1Tree t;
  GateRecordingSpawner spawner(/*into_cgroup=*/true);  // no use on v1: the gate it is
  auto proc = WorkerProcess::start(spawner, spec_with(t.tree));
  REQUIRE(proc);
  REQUIRE((*proc)->cgroup() != nullptr);
  CHECK(request_has_arg(spawner.request, "--gate-fd"));
  CHECK(spawner.request.into_cgroup_fd == -1);
  for (const std::string& d : (*proc)->cgroup()->dirs()) {
    CHECK(t.kernel->pids_in(d) == std::vector<pid_t>{kChildPid});
  }
  char byte = 0;
  REQUIRE(::read(spawner.gate.get(), &byte, 1) == 1);  // sent after the placement
  CHECK(byte == '1');
  const std::vector<std::string> dirs = (*proc)->cgroup()->dirs();
  proc->reset();  // the worker goes: so does its cgroup
  for (const std::string& d : dirs) CHECK_FALSE(std::filesystem::exists(d));
}

TEST_CASE("a worker that cannot be placed gets end of file at its gate and the start fails") {
  V1Tree t;
  GateRecordingSpawner spawner(false);
  t.kernel->refuse = {t.dir.path + "/sys/fs/cgroup/pids/sandpool-1/p-1/cgroup.procs"};
  auto proc = WorkerProcess::start(spawner, spec_with(t.tree));
  REQUIRE_FALSE(proc);
  CHECK(proc.status().message().find("placing worker 4321 in its cgroup") != std::string::npos);
  char byte = 0;
  CHECK(::read(spawner.gate.get(), &byte, 1) == 0);
  CHECK_FALSE(std::filesystem::exists(t.dir.path + "/sys/fs/cgroup/memory/sandpool-1/p-1"));
}

TEST_CASE("v2 with a spawner that clones into the cgroup: no gate, the cgroup's fd instead") {
  ScratchDir dir;
  auto kernel = std::make_shared<FakeCgroupKernel>(CgroupVersion::kV2);
  kernel->root = dir.path;
  kernel->hierarchy_root = dir.path;  // poold sits in the root cgroup
  for (const char* f : {"cgroup.procs", "cgroup.subtree_control"}) {
    FakeCgroupKernel::touch(dir.path + "/" + f, "");
  }
  CgroupLayout l;
  l.unified_dir = dir.path;
  auto tree = CgroupTree::open(kernel, l, "sandpool-1");
  REQUIRE(tree);

  GateRecordingSpawner spawner(true);
  auto proc = WorkerProcess::start(spawner, spec_with(*tree));
  REQUIRE(proc);
  CHECK_FALSE(request_has_arg(spawner.request, "--gate-fd"));
  CHECK(spawner.into_cgroup_path == dir.path + "/sandpool-1/p-1");

  GateRecordingSpawner plain(false);  // the vfork spawner: the gate, as on v1
  auto gated = WorkerProcess::start(plain, spec_with(*tree));
  REQUIRE(gated);
  CHECK(request_has_arg(plain.request, "--gate-fd"));
  CHECK(kernel->pids_in(dir.path + "/sandpool-1/p-2") == std::vector<pid_t>{kChildPid});
}

TEST_CASE("without cgroups there is no gate") {
  GateRecordingSpawner spawner(false);
  LaunchSpec spec = spec_with(nullptr);
  auto proc = WorkerProcess::start(spawner, spec);
  REQUIRE(proc);
  CHECK((*proc)->cgroup() == nullptr);
  CHECK_FALSE(request_has_arg(spawner.request, "--gate-fd"));
  // stdout, stderr, the region, the doorbell, the plugin, its directory and the manager's
  // pidfd: nothing on 5.
  CHECK(spawner.request.fds.size() == 7);
  CHECK(std::none_of(spawner.request.fds.begin(), spawner.request.fds.end(),
                     [](auto m) { return m.first == 5; }));
}

TEST_CASE("a worker is handed a pidfd of its manager, above its other fds") {
  GateRecordingSpawner spawner(false);
  auto proc = WorkerProcess::start(spawner, spec_with(nullptr));
  REQUIRE(proc);
  const auto& args = spawner.request.args;
  auto flag = std::find(args.begin(), args.end(), "--manager-pidfd");
  REQUIRE(flag != args.end());
  REQUIRE(std::next(flag) != args.end());
  const int child_fd = std::stoi(*std::next(flag));
  for (auto [c, p] : spawner.request.fds) CHECK(c <= child_fd);
  REQUIRE(spawner.copies.count(child_fd) == 1);
  // The kernel says which process a pidfd stands for: this one.
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(spawner.copies[child_fd].get()));
  std::string line, pid;
  while (std::getline(info, line)) {
    if (line.rfind("Pid:", 0) == 0) pid = line.substr(line.find_first_not_of(" \t", 4));
  }
  CHECK(pid == std::to_string(::getpid()));
}
