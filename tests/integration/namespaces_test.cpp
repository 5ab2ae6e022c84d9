// Workers in namespaces, with real processes: a pool whose sandbox asks for every namespace
// spawns through clone3, and the ns_probe plugin reports what the worker sees from inside.
// The kernel here (6.18, root, user namespaces allowed) supports them all; a test skips
// (ctest's SKIP_RETURN_CODE), with the reason, only where the kernel refuses one, as a probe
// of its own finds (host_probe.hpp), and fails where sandpool's probe disagrees with it.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sandpool/pool/spawner.hpp>

#include <sandpool/pool/proc_stats.hpp>
#include "host_probe.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::run;

namespace {

const std::string kProbe = std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/libns_probe.so";

// Skips the test unless the kernel lets a child of this process create every namespace;
// then sandpool's own probe must agree (or the pools below would quietly run without them).
void require_all_namespaces() {
  sandpool::testing::require_namespaces();
  std::string why;
  const sandbox::NamespaceSet all = sandbox::NamespaceSet::all();
  const sandbox::NamespaceSet found = probe_namespaces(all, &why);
  INFO("sandpool's probe_namespaces: " << why);
  REQUIRE(found == all);
}

PoolOptions isolated_pool(std::uint32_t workers = 1) {
  PoolOptions o;
  o.name = "test-ns";
  o.plugin_path = kProbe;
  o.worker_path = SANDPOOL_WORKER_PATH;
  o.workers = workers;
  o.missed_heartbeats = 40;
  o.retry.base = 1ms;
  o.retry.max = 20ms;
  // The probe makes syscalls no profile allows (socket, connect, fork): seccomp is another
  // layer, tested on its own.
  o.sandbox.profile = sandbox::SeccompProfile::kOff;
  o.sandbox.namespaces.wanted = sandbox::NamespaceSet::all();
  return o;
}

std::string probe(Pool& pool, const std::string& cmd) {
  TaskResult r = run(pool, "probe", cmd);
  REQUIRE(r.state == TaskState::kCompleted);
  return r.result;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// A TCP listener on 127.0.0.1 in the test's (the host's) network namespace.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 8) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  bool accepted_anything() const {
    const int c = ::accept(fd, nullptr, nullptr);
    if (c >= 0) ::close(c);
    return c >= 0;
  }
};

}  // namespace

TEST_CASE("a namespaced worker is pid 1 of its own pid namespace and sees no other process") {
  require_all_namespaces();
  auto pool = make_pool(isolated_pool());
  CHECK(probe(*pool, "pid") == "1");
  CHECK(probe(*pool, "procs") == "1");
  // The manager still sees it by its outer pid: /proc reads for RSS and CPU work.
  const pid_t outer = pool->workers().at(0).pid;
  CHECK(outer != 1);
  CHECK(supervision::rss_bytes(outer) > 0);
  CHECK(supervision::cpu_ns(outer) > 0);
}

TEST_CASE("a namespaced worker has only lo, up, and cannot reach a listener on the host") {
  require_all_namespaces();
  auto pool = make_pool(isolated_pool());
  CHECK(probe(*pool, "ifaces") == "lo");
  Listener host;
  const std::string answer = probe(*pool, "connect " + std::to_string(host.port));
  // lo is up (not ENETUNREACH) but nobody listens on its own 127.0.0.1.
  CHECK(answer == "error:" + std::to_string(ECONNREFUSED));
  CHECK_FALSE(host.accepted_anything());
}

TEST_CASE("a namespaced worker sees a read-only minimal view: no /home, no secret, its own /tmp") {
  require_all_namespaces();
  // A world-readable secret outside the view.
  char dir_template[] = "/var/tmp/sp-ns-secret-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::filesystem::path dir(dir_template);
  ::chmod(dir.c_str(), 0755);
  const std::string secret = (dir / "secret").string();
  std::ofstream(secret) << "hunter2";
  ::chmod(secret.c_str(), 0644);
  // And one in the host's /tmp, which the worker's /tmp must not show.
  const std::string host_tmp_file = "/tmp/sp-ns-host-file-" + std::to_string(::getpid());
  std::ofstream(host_tmp_file) << "host";

  PoolOptions o = isolated_pool();
  o.sandbox.namespaces.tmpfs_size = 1u << 20;
  auto pool = make_pool(o);
  CHECK(probe(*pool, "read " + secret) == "error:" + std::to_string(ENOENT));
  CHECK(probe(*pool, "ls /home") == "error:" + std::to_string(ENOENT));
  // Nothing of the host's /tmp: the view has nothing there of its own either.
  CHECK(probe(*pool, "ls /tmp") == "");
  CHECK(probe(*pool, "fstype /tmp") == "tmpfs");
  CHECK(probe(*pool, "write /tmp/scratch") == "wrote");
  // Neither the plugin's directory nor the worker host's: both came as fds.
  CHECK(probe(*pool, "ls " + std::string(SANDPOOL_TEST_PLUGIN_DIR)) ==
        "error:" + std::to_string(ENOENT));
  CHECK(probe(*pool, "ls " + std::filesystem::path(SANDPOOL_WORKER_PATH).parent_path().string()) ==
        "error:" + std::to_string(ENOENT));
  // What is shown is read-only, and glibc's files are there.
  CHECK(probe(*pool, "write /etc/x") == "error:" + std::to_string(EROFS));
  CHECK(probe(*pool, "read /etc/passwd").rfind("read:root:", 0) == 0);
  CHECK(probe(*pool, "hostname") == "sandpool");
  CHECK(pool->isolation() == "ns:user,pid,net,ipc,uts,mnt+rlimits+seccomp:off");

  std::filesystem::remove_all(dir);
  std::filesystem::remove(host_tmp_file);
}

TEST_CASE("with a root manager the worker is the overflow user, or the ns root over a 1:1 user") {
  require_all_namespaces();
  sandpool::testing::require_root("the id maps of a root manager");
  SECTION("no worker user configured: nobody, inside and out") {
    auto pool = make_pool(isolated_pool());
    CHECK(probe(*pool, "ids") == "65534 65534");
    const pid_t outer = pool->workers().at(0).pid;
    CHECK(read_file("/proc/" + std::to_string(outer) + "/uid_map").find("65534") !=
          std::string::npos);
  }
  SECTION("a worker user: root of the namespace (nobody outside) until step 4 drops to it") {
    PoolOptions o = isolated_pool();
    o.user = "4321";  // an id no user has: uid = gid = 4321
    auto pool = make_pool(o);
    CHECK(probe(*pool, "ids") == "4321 4321");
    const std::string status =
        read_file("/proc/" + std::to_string(pool->workers().at(0).pid) + "/status");
    CHECK(status.find("Uid:\t4321\t4321\t4321\t4321") != std::string::npos);
    std::istringstream maps(
        read_file("/proc/" + std::to_string(pool->workers().at(0).pid) + "/uid_map"));
    std::uint32_t inside = 0, outside = 0, count = 0;
    std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> rows;
    while (maps >> inside >> outside >> count) rows.emplace_back(inside, outside, count);
    CHECK(rows == std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>>{
                      {0, 65534, 1}, {4321, 4321, 1}});
  }
}

TEST_CASE("tasks flow through the ring of a namespaced worker, and kills still work") {
  require_all_namespaces();
  PoolOptions o = isolated_pool(2);
  o.timeout = 300ms;
  o.retries = 0;
  auto pool = make_pool(o);
  std::vector<Ticket> ts;
  for (int i = 0; i < 200; ++i) ts.push_back(*pool->submit("probe", "echo " + std::to_string(i)));
  for (int i = 0; i < 200; ++i) {
    REQUIRE(ts[i].wait_for(kPatience));
    CHECK(ts[i].wait().result == std::to_string(i));
  }
  // pid 1 ignores signals it has no handler for, but not SIGKILL from outside: a hung task
  // is still killed at its timeout (with a backtrace: that signal has a handler).
  TaskResult hung = run(*pool, "probe", "hang");
  REQUIRE(hung.attempts() == 1);
  CHECK(hung.history[0].outcome == Outcome::kTimedOut);
  CHECK_FALSE(hung.history[0].backtrace.empty());
  CHECK(probe(*pool, "echo after") == "after");
  // A crash is still a crash. pid 1 cannot die by a signal it sends itself (abort's SIGABRT
  // is ignored), so abort() ends on its fallback, a faulting instruction: SIGSEGV.
  TaskResult crashed = run(*pool, "probe", "abort");
  REQUIRE(crashed.attempts() == 1);
  CHECK(crashed.history[0].outcome == Outcome::kLost);
  CHECK_THAT(crashed.history[0].error, Catch::Contains("SIGSEGV") || Catch::Contains("SIGABRT"));
  CHECK(probe(*pool, "echo after crash") == "after crash");
}

TEST_CASE("a namespaced worker's own children die with it: no stray process") {
  require_all_namespaces();
  std::vector<pid_t> outer_pids;
  {
    auto pool = make_pool(isolated_pool());
    const pid_t worker = pool->workers().at(0).pid;
    CHECK(probe(*pool, "fork") == "forked");
    std::istringstream kids(read_file("/proc/" + std::to_string(worker) + "/task/" +
                                      std::to_string(worker) + "/children"));
    pid_t kid = 0;
    while (kids >> kid) outer_pids.push_back(kid);
    REQUIRE(outer_pids.size() == 1);
    outer_pids.push_back(worker);
    pool->close();
  }
  // Reaped by the kernel's namespace teardown: the grandchild was reparented to the
  // subreaper above us (if any) or init, which reap it asynchronously.
  const auto until = std::chrono::steady_clock::now() + kPatience;
  for (pid_t p : outer_pids) {
    while (alive(p) && std::chrono::steady_clock::now() < until) {
      const std::string stat = read_file("/proc/" + std::to_string(p) + "/stat");
      if (stat.find(") Z ") != std::string::npos) break;  // dead, waiting for its reaper
      std::this_thread::sleep_for(5ms);
    }
    const std::string stat = read_file("/proc/" + std::to_string(p) + "/stat");
    CHECK((!alive(p) || stat.find(") Z ") != std::string::npos));
  }
}

TEST_CASE("a spawn request with a cgroup fd is refused by the plain spawner") {
  SpawnRequest req;
  req.executable = "/bin/true";
  req.into_cgroup_fd = 0;
  auto r = make_process_spawner()->spawn(req);
  REQUIRE_FALSE(r);
  CHECK(r.status().message().find("clone3") != std::string::npos);
}

TEST_CASE("the clone3 spawner starts a child inside a cgroup v2 directory (CLONE_INTO_CGROUP)") {
  // This host's cgroup2 hierarchy has no controllers, but CLONE_INTO_CGROUP needs none: the
  // placement itself is what a v2 host's workers rely on instead of the gate.
  std::string mount, own;
  {
    std::ifstream mi("/proc/self/mountinfo");
    for (std::string line; std::getline(mi, line);) {
      std::istringstream f(line);
      std::string field, point;
      for (int i = 0; i < 5 && f >> field; ++i) point = i == 4 ? field : point;
      const auto dash = line.find(" - ");
      if (dash != std::string::npos && line.compare(dash + 3, 8, "cgroup2 ") == 0) mount = point;
    }
    std::ifstream cg("/proc/self/cgroup");
    for (std::string line; std::getline(cg, line);) {
      if (line.rfind("0::", 0) == 0) own = line.substr(3);
    }
  }
  if (mount.empty() || own.empty())
    sandpool::testing::skip_test("no cgroup2 hierarchy mounted here");
  const std::string rel =
      (own == "/" ? "" : own) + "/sandpool-clone-test-" + std::to_string(::getpid());
  const std::string dir = mount + rel;
  if (::mkdir(dir.c_str(), 0755) != 0) {
    sandpool::testing::skip_test("cannot make a cgroup in " + mount + own + ": " +
                                 std::strerror(errno));
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dir_fd >= 0);
  {
    Clone3SpawnerOptions so;
    so.namespaces.wanted.add(sandbox::Namespace::kPid);
    auto spawner = make_clone3_spawner(so);
    REQUIRE(spawner->places_into_cgroup());
    SpawnRequest req;
    req.executable = "/bin/sleep";
    req.args = {"60"};
    req.into_cgroup_fd = dir_fd;
    auto child = spawner->spawn(req);
    REQUIRE(child);
    CHECK(read_file("/proc/" + std::to_string(child->pid()) + "/cgroup").find("0::" + rel + "\n") !=
          std::string::npos);
    CHECK(read_file(dir + "/cgroup.procs") == std::to_string(child->pid()) + "\n");
    child->signal(SIGKILL);
    child->wait();
  }
  ::close(dir_fd);
  CHECK(::rmdir(dir.c_str()) == 0);
}
