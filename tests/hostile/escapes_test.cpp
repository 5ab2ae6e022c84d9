// Hostile plugins that try to get out: read a file outside their view, look at their fds,
// reach the network, exec, ptrace or kill the manager, lift their limits, make a syscall
// that does not exist.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sandpool/base/unique_fd.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;

namespace {

// A world-readable secret in a world-readable directory of its own, removed at the end.
class Secret {
 public:
  Secret()
      : dir_(std::filesystem::temp_directory_path() /
             ("sandpool-hostile-secret-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    std::ofstream(path()) << text();
    ::chmod(dir_.c_str(), 0755);
    ::chmod(path().c_str(), 0644);
  }
  ~Secret() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path() const { return (dir_ / "secret").string(); }
  static std::string text() { return "the-hostile-suite-secret-7f3a"; }

 private:
  std::filesystem::path dir_;
};

// A TCP listener on 127.0.0.1, on a port the kernel picks.
class Listener {
 public:
  Listener() {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    REQUIRE(fd_.get() >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      // A network namespace without a loopback address (some containers): nothing to
      // listen on, so nothing to attack.
      sandpool::hostile::skip_test(std::string("no 127.0.0.1 to listen on: ") +
                                   std::strerror(errno));
    }
    REQUIRE(::listen(fd_.get(), 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  int port() const { return port_; }
  // Returns true iff a connection is waiting to be accepted (or was made and dropped).
  bool saw_anything() const {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

void require_violation(const TaskResult& r, const std::string& syscall) {
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: " + syscall);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);  // not retried by default
}

}  // namespace

TEST_CASE("opening a file under the strict profile is a sandbox_violation") {
  Secret secret;
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("read_file", secret.path());
  require_violation(r, "openat");
  CHECK(r.result.find(Secret::text()) == std::string::npos);
  world.close_and_check_clean();
}

// relaxed allows reading files; what keeps the secret out of reach is the worker's view
// (Landlock, or the mount namespace). Not registered until those land.
TEST_CASE("a relaxed worker cannot read a world-readable file outside its view", "[needs-privs]") {
  Secret secret;
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  world.start(o);
  const TaskResult r = world.attack("read_file", secret.path());
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.history[0].outcome == Outcome::kFailed);  // open() refused, the plugin said so
  CHECK(r.result.find(Secret::text()) == std::string::npos);
  CHECK(r.error.find(Secret::text()) == std::string::npos);
  CHECK(world.log().count(Secret::text()) == 0);
  world.close_and_check_clean();
}

TEST_CASE("a worker sees only its channel's fds in /proc/self/fd") {
  if (!std::filesystem::is_directory("/proc/self/fd")) {
    sandpool::hostile::skip_test("no /proc/self/fd on this host: nothing to list");
  }
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;  // opendir needs it
  world.start(o);
  const TaskResult r = world.attack("list_fds", "");
  INFO(r.error);
  // stdin (/dev/null), stdout and stderr (the pipe to the manager's log), the shared
  // region and the doorbell: nothing else was inherited or left open by the host.
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "0 1 2 3 4");
  world.close_and_check_clean();
}

TEST_CASE("connecting to a listener on 127.0.0.1 is stopped at socket()") {
  Listener listener;
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("connect", std::to_string(listener.port()));
  require_violation(r, "socket");
  CHECK_FALSE(listener.saw_anything());
  world.close_and_check_clean();
}

// A pool that allows sockets still has no route out: its own network namespace has
// nothing but a loopback of its own. The network namespace is what stops it.
TEST_CASE("a worker allowed sockets reaches no listener of the host", "[needs-ns]") {
  Listener listener;
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.allow_syscalls = {"socket", "connect", "close"};
  o.sandbox.namespaces.wanted = sandbox::NamespaceSet::all();  // the layer that stops it
  world.start(o);
  const TaskResult r = world.attack("connect", std::to_string(listener.port()));
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.history[0].error == "connect refused");
  CHECK_FALSE(listener.saw_anything());
  world.close_and_check_clean();
}

TEST_CASE("execve(\"/bin/sh\") is a sandbox_violation") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("exec_shell", "");
  require_violation(r, "execve");
  CHECK(world.log().count("escaped") == 0);  // the shell never printed
  world.close_and_check_clean();
}

TEST_CASE("ptrace on the manager is a sandbox_violation, and nobody traces it") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("ptrace", std::to_string(::getpid()));
  require_violation(r, "ptrace");
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("TracerPid:", 0) == 0) CHECK(line == "TracerPid:\t0");
  }
  world.close_and_check_clean();
}

TEST_CASE("kill(manager, SIGKILL) is a sandbox_violation, and the manager lives") {
  HostileWorld world;
  world.start(hostile_options());
  // Were the filter to let it through, this test process would die here: the test fails.
  const TaskResult r = world.attack("kill", std::to_string(::getpid()));
  require_violation(r, "kill");
  world.close_and_check_clean();
}

TEST_CASE("raising its own rlimits is a sandbox_violation") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("raise_rlimits", "");
  require_violation(r, "prlimit64");  // glibc's setrlimit
  world.close_and_check_clean();
}

TEST_CASE("syscall(999) is a sandbox_violation naming the number") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("syscall_999", "");
  require_violation(r, "syscall_999");
  world.close_and_check_clean();
}
