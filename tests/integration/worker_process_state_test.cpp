// Lock-down step 2 and 3 as a plugin sees them (docs/security.md, "The lock-down steps"): a
// real pool's worker runs its plugin with cwd "/", umask 077, stdin on /dev/null, no core
// dumps and only the environment the pool keeps, whatever the manager's own are. The
// process_state test plugin reports them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// The "key=value" lines of the plugin's report.
std::map<std::string, std::string> report_of(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The manager's own state, made unlike a worker's for the test's length: a cwd other than
// "/", umask 0, a pipe on stdin, core dumps allowed, and two variables of which the pool
// keeps one. Restored at scope exit.
class ManagerState {
 public:
  ManagerState() {
    old_mask_ = ::umask(0);
    REQUIRE(::getcwd(old_cwd_, sizeof old_cwd_) != nullptr);
    REQUIRE(::chdir("/tmp") == 0);
    REQUIRE(::pipe2(pipe_, O_CLOEXEC) == 0);
    old_stdin_ = ::dup(STDIN_FILENO);
    REQUIRE(::dup2(pipe_[0], STDIN_FILENO) == STDIN_FILENO);
    REQUIRE(::getrlimit(RLIMIT_CORE, &old_core_) == 0);
    core_ = old_core_;
    core_.rlim_cur = core_.rlim_max;  // as much as this process may have: all of it for root
    if (::geteuid() == 0) core_.rlim_cur = core_.rlim_max = RLIM_INFINITY;
    REQUIRE(::setrlimit(RLIMIT_CORE, &core_) == 0);
    REQUIRE(::setenv("SP_TEST_KEPT", "kept value", 1) == 0);
    REQUIRE(::setenv("SP_TEST_SECRET", "not for workers", 1) == 0);
    ::unsetenv("SP_TEST_UNSET");
  }
  ~ManagerState() {
    ::unsetenv("SP_TEST_KEPT");
    ::unsetenv("SP_TEST_SECRET");
    ::setrlimit(RLIMIT_CORE, &old_core_);
    if (old_stdin_ >= 0) {
      ::dup2(old_stdin_, STDIN_FILENO);
      ::close(old_stdin_);
    }
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    (void)!::chdir(old_cwd_);
    ::umask(old_mask_);
  }
  ManagerState(const ManagerState&) = delete;
  ManagerState& operator=(const ManagerState&) = delete;
  rlim_t core_limit() const { return core_.rlim_cur; }

 private:
  mode_t old_mask_ = 022;
  char old_cwd_[4096] = {};
  int pipe_[2] = {-1, -1};
  int old_stdin_ = -1;
  rlimit old_core_{}, core_{};
};

}  // namespace

TEST_CASE("a worker runs its plugin in /, umask 077, stdin /dev/null, no core, kept env only") {
  ManagerState manager;
  REQUIRE(manager.core_limit() != 0);  // else the core check below could not tell
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libprocess_state.so";
  o.sandbox.allow_syscalls = {"getcwd", "umask", "prlimit64", "read"};  // the report's calls
  o.sandbox.keep_env = {"SP_TEST_KEPT", "SP_TEST_UNSET"};
  auto pool = make_pool(o);
  const TaskResult r = run(*pool, "state", "");
  INFO(r.error << r.result);
  REQUIRE(r.state == TaskState::kCompleted);
  auto report = report_of(r.result);

  CHECK(report["cwd"] == "/");
  CHECK(report["umask"] == "0077");
  struct stat null {};
  REQUIRE(::stat("/dev/null", &null) == 0);
  CHECK(report["stdin"] ==
        "chr " + std::to_string(major(null.st_rdev)) + ":" + std::to_string(minor(null.st_rdev)));
  CHECK(report["eof"] == "1");
  CHECK(report["core"] == "0/0");
  // Exactly the kept variable that the manager has: not its others, not one it lacks.
  CHECK(split(report["env"], '|') == std::vector<std::string>{"SP_TEST_KEPT=kept value"});
}
