// Per-worker cgroups against fake kernels: cgroup trees in temporary directories, laid out
// like this machine's hybrid v1 host and like a systemd v2 host with Delegate=yes.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fake_cgroup_tree.hpp"
#include "supervision/cgroup_layout.hpp"
#include "supervision/worker_cgroups.hpp"

using namespace sandpool;
using namespace sandpool::supervision;
using sandpool::testing::FakeCgroupKernel;
using sandpool::testing::ScratchDir;

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// This machine, probed: v1 controllers under /sys/fs/cgroup/<name>, a cgroup2 hierarchy
// without controllers at /sys/fs/cgroup/unified.
constexpr const char* kHybridMounts =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridSelf =
    "9:name=systemd:/\n8:pids:/\n4:memory:/agents/a1\n2:cpuacct:/\n1:cpu:/\n0::/\n";

constexpr const char* kV2Mounts =
    "25 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";
constexpr const char* kV2Self = "0::/system.slice/sandpool.service\n";

// A v2 host: the service's delegated cgroup, offering memory, pids and cpu, holding poold.
struct V2Host {
  ScratchDir dir;
  std::shared_ptr<FakeCgroupKernel> kernel = std::make_shared<FakeCgroupKernel>(CgroupVersion::kV2);
  std::string own;
  V2Host() {
    kernel->root = dir.path;
    kernel->hierarchy_root = dir.path + "/sys/fs/cgroup";
    own = kernel->hierarchy_root + "/system.slice/sandpool.service";
    fs::create_directories(own);
    for (const char* f : {"cgroup.procs", "cgroup.subtree_control", "cgroup.kill"}) {
      FakeCgroupKernel::touch(own + "/" + f, "");
    }
    FakeCgroupKernel::touch(own + "/cgroup.controllers", "cpu io memory pids\n");
    FakeCgroupKernel::touch(own + "/cgroup.procs", std::to_string(::getpid()) + "\n");
  }
  CgroupLayout layout() {
    auto l = detect_cgroup_layout({kV2Mounts, kV2Self, dir.path}, *kernel);
    REQUIRE(l);
    return *l;
  }
};

// This machine's layout, in a temporary directory.
struct V1Host {
  ScratchDir dir;
  std::shared_ptr<FakeCgroupKernel> kernel = std::make_shared<FakeCgroupKernel>(CgroupVersion::kV1);
  std::string memory, pids, cpu;
  V1Host() {
    kernel->root = dir.path;
    memory = dir.path + "/sys/fs/cgroup/memory/agents/a1";
    pids = dir.path + "/sys/fs/cgroup/pids";
    cpu = dir.path + "/sys/fs/cgroup/cpu";
    for (const std::string& d : {memory, pids, cpu, dir.path + "/sys/fs/cgroup/unified"}) {
      fs::create_directories(d);
      FakeCgroupKernel::touch(d + "/cgroup.procs", "");
    }
  }
  CgroupLayout layout() {
    auto l = detect_cgroup_layout({kHybridMounts, kHybridSelf, dir.path}, *kernel);
    REQUIRE(l);
    return *l;
  }
};

}  // namespace

TEST_CASE("a v2 host whose delegated cgroup offers memory and pids is detected as v2") {
  V2Host host;
  const CgroupLayout l = host.layout();
  CHECK(l.version == CgroupVersion::kV2);
  CHECK(l.unified_dir == host.own);
}

TEST_CASE("this machine's hybrid layout (cgroup2 without controllers, v1 memory and pids) is v1") {
  V1Host host;
  const CgroupLayout l = host.layout();
  CHECK(l.version == CgroupVersion::kV1);
  CHECK(l.v1_dirs.at("memory") == host.memory);
  CHECK(l.v1_dirs.at("pids") == host.pids);
  CHECK(l.v1_dirs.at("cpu") == host.cpu);
}

TEST_CASE("a mount of a sub-tree and co-mounted cpu,cpuacct resolve to the process's own dirs") {
  ScratchDir dir;
  FakeCgroupKernel kernel(CgroupVersion::kV1);
  const std::string mounts =
      "1 0 0:1 /docker/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "2 0 0:2 /docker/c1 /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
      "3 0 0:3 / /sys/fs/cgroup/cpu\\054cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
  const std::string self = "5:memory:/docker/c1\n4:pids:/docker/c1/x\n3:cpu,cpuacct:/y\n";
  auto l = detect_cgroup_layout({mounts, self, dir.path}, kernel);
  REQUIRE(l);
  CHECK(l->v1_dirs.at("memory") == dir.path + "/sys/fs/cgroup/memory");
  CHECK(l->v1_dirs.at("pids") == dir.path + "/sys/fs/cgroup/pids/x");
  CHECK(l->v1_dirs.at("cpu") == dir.path + "/sys/fs/cgroup/cpu,cpuacct/y");
  CHECK(l->v1_dirs.at("cpuacct") == l->v1_dirs.at("cpu"));
}

TEST_CASE("a host with neither usable hierarchy is an error that says what is missing") {
  ScratchDir dir;
  FakeCgroupKernel kernel(CgroupVersion::kV2);
  const std::string mounts = "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  fs::create_directories(dir.path + "/sys/fs/cgroup/unified");
  FakeCgroupKernel::touch(dir.path + "/sys/fs/cgroup/unified/cgroup.controllers", "\n");
  auto l = detect_cgroup_layout({mounts, "0::/\n", dir.path}, kernel);
  REQUIRE_FALSE(l);
  CHECK(l.status().message().find("offers no memory and pids controllers") != std::string::npos);
  CHECK(l.status().message().find("no cgroup v1 memory hierarchy") != std::string::npos);
}

TEST_CASE("v2: poold moves itself into a leaf, then enables the controllers for its workers") {
  V2Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  CHECK(host.kernel->pids_in(host.own + "/sandpool-manager") == std::vector<pid_t>{::getpid()});
  CHECK(host.kernel->pids_in(host.own).empty());
  CHECK(slurp(host.own + "/cgroup.subtree_control") == "+cpu");  // the last of its writes
  CHECK((*tree)->parents() == std::vector<std::string>{host.own + "/sandpool-1"});
}

TEST_CASE("v2: a worker's cgroup gets its limits, its pid, its OOM count and a clean teardown") {
  V2Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("images", {64u << 20, 32, 0.5});
  REQUIRE(cg);
  const std::string dir = host.own + "/sandpool-1/images-1";
  REQUIRE((*cg)->dirs() == std::vector<std::string>{dir});
  CHECK(slurp(dir + "/memory.max") == std::to_string(64u << 20));
  CHECK(slurp(dir + "/memory.swap.max") == "0");
  CHECK(slurp(dir + "/memory.oom.group") == "1");
  CHECK(slurp(dir + "/pids.max") == "32");
  CHECK(slurp(dir + "/cpu.max") == "50000 100000");

  REQUIRE((*cg)->place(4242));
  CHECK(host.kernel->pids_in(dir) == std::vector<pid_t>{4242});
  CHECK_FALSE((*cg)->oom_killed());
  FakeCgroupKernel::touch(dir + "/memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n");
  CHECK((*cg)->oom_killed());

  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->killed == std::vector<pid_t>{4242});  // by cgroup.kill
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("v2: without swap accounting or memory.oom.group the other limits still apply") {
  V2Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  const std::string dir = host.own + "/sandpool-1/p-1";
  host.kernel->refuse = {dir + "/memory.swap.max", dir + "/memory.oom.group"};
  host.kernel->refuse_errno = ENOENT;  // what a kernel without them answers
  auto cg = (*tree)->create("p", {32u << 20, 0, 0});
  REQUIRE(cg);
  CHECK(slurp(dir + "/memory.max") == std::to_string(32u << 20));
}

TEST_CASE("a limit the kernel refuses fails the worker's cgroup and leaves no directory") {
  V2Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  host.kernel->refuse = {host.own + "/sandpool-1/p-1/pids.max"};
  auto cg = (*tree)->create("p", {0, 10, 0});
  REQUIRE_FALSE(cg);
  CHECK(cg.status().message().find("pids.max") != std::string::npos);
  CHECK_FALSE(fs::exists(host.own + "/sandpool-1/p-1"));
}

TEST_CASE("a cgroup that is not writable is refused, naming the directory and Delegate=yes") {
  V2Host host;
  host.kernel->read_only = {host.own};
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE_FALSE(tree);
  CHECK(tree.status().message().find(host.own) != std::string::npos);
  CHECK(tree.status().message().find("Delegate=yes") != std::string::npos);
}

TEST_CASE("the parent of a dead manager is killed and removed when a tree opens") {
  V2Host host;
  const std::string stale = host.own + "/sandpool-99999/p-1";
  fs::create_directories(stale);
  FakeCgroupKernel::touch(stale + "/cgroup.procs", "777\n");
  FakeCgroupKernel::touch(host.own + "/sandpool-99999/cgroup.procs", "");
  const std::string alive = host.own + "/sandpool-12345";
  fs::create_directories(alive);
  host.kernel->live = {12345};
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  CHECK_FALSE(fs::exists(host.own + "/sandpool-99999"));
  CHECK(host.kernel->killed == std::vector<pid_t>{777});
  CHECK(fs::exists(alive));  // another live manager's
}

TEST_CASE("v1: limits go to the memory, pids and cpu hierarchies, memsw included") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("pool/x", {128u << 20, 16, 1.5});
  REQUIRE(cg);
  const std::string mem = host.memory + "/sandpool-1/pool_x-1";
  const std::string pids = host.pids + "/sandpool-1/pool_x-1";
  const std::string cpu = host.cpu + "/sandpool-1/pool_x-1";
  CHECK((*cg)->dirs() == std::vector<std::string>{mem, pids, cpu});
  CHECK(slurp(mem + "/memory.limit_in_bytes") == std::to_string(128u << 20));
  CHECK(slurp(mem + "/memory.memsw.limit_in_bytes") == std::to_string(128u << 20));
  CHECK(slurp(pids + "/pids.max") == "16");
  CHECK(slurp(cpu + "/cpu.cfs_period_us") == "100000");
  CHECK(slurp(cpu + "/cpu.cfs_quota_us") == "150000");
  REQUIRE((*cg)->place(31337));
  for (const std::string& d : (*cg)->dirs()) {
    CHECK(host.kernel->pids_in(d) == std::vector<pid_t>{31337});
  }
}

TEST_CASE("v1: without swap accounting no memsw limit is written, no quota, no cpu cgroup") {
  V1Host host;
  host.kernel->missing = {"memory.memsw.limit_in_bytes"};
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {64u << 20, 0, 0});
  REQUIRE(cg);
  CHECK((*cg)->dirs().size() == 2);  // memory and pids only
  CHECK(slurp((*cg)->dirs()[0] + "/memory.limit_in_bytes") == std::to_string(64u << 20));
  CHECK_FALSE(fs::exists((*cg)->dirs()[0] + "/memory.memsw.limit_in_bytes"));
}

TEST_CASE("v1: a memsw limit the kernel refuses is an error, not silently skipped") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  host.kernel->refuse = {host.memory + "/sandpool-1/p-1/memory.memsw.limit_in_bytes"};
  REQUIRE_FALSE((*tree)->create("p", {64u << 20, 0, 0}));
  CHECK_FALSE(fs::exists(host.memory + "/sandpool-1/p-1"));
}

TEST_CASE("v1: OOM kills are read from memory.oom_control, else from memory.failcnt") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {64u << 20, 0, 0});
  REQUIRE(cg);
  const std::string mem = (*cg)->dirs()[0];
  FakeCgroupKernel::touch(mem + "/memory.oom_control",
                          "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  FakeCgroupKernel::touch(mem + "/memory.failcnt", "12\n");
  CHECK_FALSE((*cg)->oom_killed());  // the limit was hit, but reclaim coped
  FakeCgroupKernel::touch(mem + "/memory.oom_control",
                          "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  CHECK((*cg)->oom_killed());
  FakeCgroupKernel::touch(mem + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  CHECK((*cg)->oom_killed());  // an old kernel: failcnt is all there is
  FakeCgroupKernel::touch(mem + "/memory.failcnt", "0\n");
  CHECK_FALSE((*cg)->oom_killed());
}

TEST_CASE("v1: teardown kills every pid listed, including forks that appear meanwhile") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {0, 8, 0});
  REQUIRE(cg);
  REQUIRE((*cg)->place(100));
  const std::string pids = (*cg)->dirs()[1];
  FakeCgroupKernel::touch(pids + "/cgroup.procs", "100\n101\n102\n");
  host.kernel->fork_on_kill = {{101, 103}};
  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->killed == std::vector<pid_t>{100, 101, 102, 103});
  for (const std::string& d : (*cg)->dirs()) CHECK_FALSE(fs::exists(d));
  CHECK((*cg)->destroy());  // idempotent
}

TEST_CASE("a process that outlives the wait for its exit is reported at once, by pid") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {});
  REQUIRE(cg);
  REQUIRE((*cg)->place(200));
  host.kernel->immortal = {200};
  Status s = (*cg)->destroy();
  REQUIRE_FALSE(s);
  CHECK(s.message().find("still populated") != std::string::npos);
  CHECK(s.message().find("200 still alive") != std::string::npos);
  CHECK(host.kernel->back_offs == 0);  // the wait was for the process, not a timer
  for (const std::string& d : (*cg)->dirs()) CHECK(fs::exists(d));
  host.kernel->immortal.clear();
  CHECK((*cg)->destroy());  // a later attempt finishes the job
  for (const std::string& d : (*cg)->dirs()) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("a real process opened by pid is SIGKILLed through its pidfd and waited for") {
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (;;) ::pause();
    }
    children.push_back(pid);
  }
  PosixCgroupFs posix;
  std::vector<std::unique_ptr<OpenedProcess>> opened;
  for (pid_t pid : children) {
    auto p = posix.open_process(pid);
    REQUIRE(p);
    REQUIRE(*p);
    CHECK((*p)->pid() == pid);
    opened.push_back(std::move(p).value());
  }
  const auto not_yet = std::chrono::steady_clock::now();
  CHECK_FALSE(opened[0]->wait_exited(not_yet));  // alive: a look, no wait
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool all_exited = true;
  for (auto& p : opened) {
    REQUIRE(p->kill());
    all_exited = p->wait_exited(deadline) && all_exited;
  }
  if (!all_exited) {
    for (pid_t pid : children) ::kill(pid, SIGKILL);
  }
  REQUIRE(all_exited);
  for (pid_t pid : children) {
    // Exited already: a wait that does not block finds each one, killed by SIGKILL.
    siginfo_t info{};
    REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG) == 0);
    CHECK(info.si_pid == pid);
    CHECK(info.si_code == CLD_KILLED);
    CHECK(info.si_status == SIGKILL);
  }
  // Reaped now: the handles signal nothing (their processes are gone, whoever has the pid
  // next), and the pids open as nothing.
  for (auto& p : opened) CHECK(p->kill());
  for (pid_t pid : children) {
    auto p = posix.open_process(pid);
    REQUIRE(p);
    CHECK_FALSE(*p);
  }
}

TEST_CASE("v1: a pid reused between reading cgroup.procs and opening it is never signalled") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {0, 8, 0});
  REQUIRE(cg);
  const std::string pids = (*cg)->dirs()[1];
  FakeCgroupKernel::touch(pids + "/cgroup.procs", "100\n101\n102\n");
  // 101 exits after the read; an unrelated process has its pid by the time it is opened.
  host.kernel->reused = {101};
  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->outsiders_signalled.empty());
  CHECK(host.kernel->signalled == std::vector<pid_t>{100, 102});
  for (const std::string& d : (*cg)->dirs()) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("v1: a member that cannot be opened is not signalled, and the teardown says so") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {});
  REQUIRE(cg);
  REQUIRE((*cg)->place(300));
  host.kernel->unopenable = {300};  // out of fds: no pidfd, and a bare pid is never signalled
  Status s = (*cg)->destroy();
  REQUIRE_FALSE(s);
  CHECK(s.message().find("pidfd_open(300)") != std::string::npos);
  CHECK(s.message().find("not signalled") != std::string::npos);
  CHECK(host.kernel->killed.empty());
  for (const std::string& d : (*cg)->dirs()) CHECK(fs::exists(d));
  host.kernel->unopenable.clear();
  CHECK((*cg)->destroy());  // a later attempt finishes the job
  CHECK(host.kernel->killed == std::vector<pid_t>{300});
}

TEST_CASE("v2: cgroup.kill does the killing, and the teardown signals nobody: it only waits") {
  V2Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("images", {});
  REQUIRE(cg);
  const std::string dir = (*cg)->dirs().front();
  FakeCgroupKernel::touch(dir + "/cgroup.procs", "400\n401\n");
  host.kernel->kill_takes_time = true;  // listed until they have exited
  host.kernel->reused = {401};          // and 401's pid is another process's by the open
  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->killed == std::vector<pid_t>{400, 401});  // by cgroup.kill
  CHECK(host.kernel->signalled.empty());
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("v2 without cgroup.kill (before 5.14): members are killed through their pidfds") {
  V2Host host;
  host.kernel->missing = {"cgroup.kill"};
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("images", {});
  REQUIRE(cg);
  const std::string dir = (*cg)->dirs().front();
  FakeCgroupKernel::touch(dir + "/cgroup.procs", "500\n501\n");
  host.kernel->reused = {501};
  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->signalled == std::vector<pid_t>{500});
  CHECK(host.kernel->outsiders_signalled.empty());
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a cgroup that lists no process but is still busy is retried with back-off") {
  V1Host host;
  auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {});
  REQUIRE(cg);
  host.kernel->busy_removals = 3;  // the kernel has not let go of the exited yet
  REQUIRE((*cg)->destroy());
  CHECK(host.kernel->back_offs == 3);
  CHECK(host.kernel->killed.empty());
  for (const std::string& d : (*cg)->dirs()) CHECK_FALSE(fs::exists(d));
}

TEST_CASE("a tree, when it goes, removes the workers' cgroups left behind and its parents") {
  V1Host host;
  std::string left;
  {
    auto tree = CgroupTree::open(host.kernel, host.layout(), "sandpool-1");
    REQUIRE(tree);
    auto cg = (*tree)->create("p", {});
    REQUIRE(cg);
    REQUIRE((*cg)->place(300));
    host.kernel->immortal = {300};
    cg->reset();  // its teardown fails: the process "never dies"
    left = host.pids + "/sandpool-1/p-1";
    REQUIRE(fs::exists(left));
    host.kernel->immortal.clear();
  }
  CHECK_FALSE(fs::exists(left));
  CHECK_FALSE(fs::exists(host.memory + "/sandpool-1"));
  CHECK_FALSE(fs::exists(host.pids + "/sandpool-1"));
  CHECK_FALSE(fs::exists(host.cpu + "/sandpool-1"));
}

TEST_CASE("a CPU quota without a cpu hierarchy fails and leaves nothing behind") {
  V1Host host;
  CgroupLayout l = host.layout();
  l.v1_dirs.erase("cpu");
  auto tree = CgroupTree::open(host.kernel, l, "sandpool-1");
  REQUIRE(tree);
  auto cg = (*tree)->create("p", {0, 0, 1.0});
  REQUIRE_FALSE(cg);
  CHECK(cg.status().message().find("cpu cgroup controller") != std::string::npos);
  CHECK_FALSE(fs::exists(host.memory + "/sandpool-1/p-1"));
}
