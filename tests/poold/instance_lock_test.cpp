#include <sandpool/service/instance_lock.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "poold_test_support.hpp"

using sandpool::poold::InstanceLock;
using sandpool::poold::read_lock_holder;
using sandpool::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string file_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A forked child of the test: killed (SIGKILL) and reaped when the test leaves its scope.
struct Child {
  pid_t pid = -1;
  ~Child() { kill_and_reap(); }
  // Returns the child's wait status.
  int kill_and_reap() {
    if (pid <= 0) return 0;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
};

// Forks a child that takes the lock on `dir` and then blocks until killed. Returns once the
// child holds the lock (it says so on a pipe), or fails the test with what the child said.
void start_lock_holder(const fs::path& dir, Child& child) {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  child.pid = ::fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    ::close(p[0]);
    auto lock = InstanceLock::acquire(dir.string());
    const char ok = lock ? 'y' : 'n';
    (void)::write(p[1], &ok, 1);
    for (;;) ::pause();  // hold the lock until SIGKILL
  }
  ::close(p[1]);
  char said = 0;
  const ssize_t n = ::read(p[0], &said, 1);  // blocks until the child has the lock (or failed)
  ::close(p[0]);
  REQUIRE(n == 1);
  REQUIRE(said == 'y');
}

}  // namespace

TEST_CASE("the lock creates a missing state dir, 0750, with missing parents") {
  TempDir tmp;
  const fs::path dir = tmp.path / "var" / "state";
  ::umask(022);
  auto lock = InstanceLock::acquire(dir.string());
  REQUIRE(lock);
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);
  CHECK(lock->path() == (dir / "poold.lock").string());
  CHECK(file_text(dir / "poold.lock") == std::to_string(::getpid()) + "\n");
}

TEST_CASE("a state dir given with a trailing slash is the same dir") {
  TempDir tmp;
  auto lock = InstanceLock::acquire((tmp.path / "state").string() + "/");
  REQUIRE(lock);
  CHECK(lock->path() == (tmp.path / "state" / "poold.lock").string());
}

TEST_CASE("an existing state dir keeps its mode") {
  TempDir tmp;
  REQUIRE(::chmod(tmp.path.c_str(), 0700) == 0);
  auto lock = InstanceLock::acquire(tmp.path.string());
  REQUIRE(lock);
  struct stat st {};
  REQUIRE(::stat(tmp.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
}

TEST_CASE("a state dir that is a file is refused") {
  TempDir tmp;
  std::ofstream(tmp.path / "plain") << "x";
  auto lock = InstanceLock::acquire((tmp.path / "plain").string());
  REQUIRE_FALSE(lock);
  CHECK(lock.status().message().find("plain") != std::string::npos);
}

TEST_CASE("a second poold on the same state dir is refused with the holder's pid") {
  TempDir tmp;
  Child holder;
  start_lock_holder(tmp.path, holder);
  CHECK(read_lock_holder((tmp.path / "poold.lock").string()) == holder.pid);

  auto second = InstanceLock::acquire(tmp.path.string());
  REQUIRE_FALSE(second);
  const std::string msg = second.status().message();
  INFO(msg);
  CHECK(msg.find("in use by another poold") != std::string::npos);
  CHECK(msg.find("pid " + std::to_string(holder.pid)) != std::string::npos);
  CHECK(msg.find((tmp.path / "poold.lock").string()) != std::string::npos);
  // The refused instance must not have touched the holder's pid.
  CHECK(file_text(tmp.path / "poold.lock") == std::to_string(holder.pid) + "\n");
}

TEST_CASE("a poold killed with SIGKILL leaves no lock behind") {
  TempDir tmp;
  Child holder;
  start_lock_holder(tmp.path, holder);
  REQUIRE_FALSE(InstanceLock::acquire(tmp.path.string()));

  const int status = holder.kill_and_reap();
  REQUIRE(WIFSIGNALED(status));
  auto next = InstanceLock::acquire(tmp.path.string());
  REQUIRE(next);
  CHECK(file_text(tmp.path / "poold.lock") == std::to_string(::getpid()) + "\n");
}

TEST_CASE("a program exec'd by poold does not inherit the lock") {
  TempDir tmp;
  auto lock = InstanceLock::acquire(tmp.path.string());
  REQUIRE(lock);
  // A long-lived child exec'd while the lock is held, as a worker would be.
  // The pipe's write end is close-on-exec too: EOF on the read end says the exec happened
  // (before it, the forked child does share the lock's descriptor).
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Child exec_child;
  exec_child.pid = ::fork();
  REQUIRE(exec_child.pid >= 0);
  if (exec_child.pid == 0) {
    ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
    const char failed = 'x';
    (void)::write(p[1], &failed, 1);
    ::_exit(127);
  }
  ::close(p[1]);
  char c = 0;
  const ssize_t n = ::read(p[0], &c, 1);
  ::close(p[0]);
  REQUIRE(n == 0);                                  // exec'd
  { InstanceLock gone = std::move(lock).value(); }  // poold exits; its worker lives on

  // Had the child inherited the descriptor, the lock would still be held through it.
  auto again = InstanceLock::acquire(tmp.path.string());
  INFO(again.status().to_string());
  CHECK(again);
}

TEST_CASE("releasing the lock empties the pid file and lets the next instance in") {
  TempDir tmp;
  {
    auto lock = InstanceLock::acquire(tmp.path.string());
    REQUIRE(lock);
    InstanceLock moved = std::move(lock).value();  // a moved lock is still held
    REQUIRE_FALSE(InstanceLock::acquire(tmp.path.string()));
  }
  CHECK(file_text(tmp.path / "poold.lock").empty());
  CHECK(read_lock_holder((tmp.path / "poold.lock").string()) == 0);
  CHECK(InstanceLock::acquire(tmp.path.string()));
}

TEST_CASE("the lock file is never followed through a symlink") {
  TempDir tmp;
  const fs::path target = tmp.path / "elsewhere";
  std::ofstream(target) << "precious\n";
  fs::create_symlink(target, tmp.path / "poold.lock");
  auto lock = InstanceLock::acquire(tmp.path.string());
  REQUIRE_FALSE(lock);
  CHECK(lock.status().message().find("open") != std::string::npos);
  CHECK(file_text(target) == "precious\n");
}
