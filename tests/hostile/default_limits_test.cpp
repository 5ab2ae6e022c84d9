// What the default limits hold (docs/configuration.md, `limits`): a pool built in code that
// sets no limit still gives its workers a memory, file-size, process and CPU limit, and a
// memory hog under them ends at the limit, not at its timeout. 0 is "none", warned about.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "hostile_world.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::sandbox::SeccompProfile;

namespace {

// A limit from /proc/<pid>/limits ("Max address space  1073741824  1073741824  bytes"):
// the soft value, or -1 for "unlimited".
long long soft_limit(std::int32_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const std::string value = line.substr(26, 21);  // the "Soft Limit" column
    return value.find("unlimited") != std::string::npos ? -1 : std::stoll(value);
  }
  FAIL("no '" << name << "' in /proc/" << pid << "/limits");
  return -2;
}

// Options that leave every limit at its default, as a pool built in code gets them.
PoolOptions default_limits(SeccompProfile profile) {
  PoolOptions o = hostile_options();
  o.sandbox.limits = PoolOptions{}.sandbox.limits;
  o.sandbox.profile = profile;
  return o;
}

}  // namespace

TEST_CASE("a worker under the default limits has memory, file, process and CPU limits") {
  HostileWorld world;
  world.start(default_limits(SeccompProfile::kStrict));
  const TaskResult echo = world.attack("echo", "which worker");
  REQUIRE(echo.state == TaskState::kCompleted);
  const std::int32_t pid = echo.history.back().worker_pid;
  CHECK(soft_limit(pid, "Max address space") == (1ll << 30));
  CHECK(soft_limit(pid, "Max file size") == (1ll << 30));
  CHECK(soft_limit(pid, "Max processes") == 256);
  CHECK(soft_limit(pid, "Max open files") == 64);
  CHECK(soft_limit(pid, "Max cpu time") == 300);  // worker_cpu_seconds: 10 x the 30 s timeout
  CHECK(world.log().count("limits set to 0") == 0);
  world.close_and_check_clean();
}

TEST_CASE("a memory hog under the default limits ends resource_limit: memory") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile));
  HostileWorld world;
  world.start(default_limits(profile));
  // First, that the default is in force: without it the hog would take the machine's memory.
  const TaskResult echo = world.attack("echo", "which worker");
  REQUIRE(echo.state == TaskState::kCompleted);
  REQUIRE(soft_limit(echo.history.back().worker_pid, "Max address space") == (1ll << 30));
  const TaskResult r = world.attack("alloc_forever", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error.rfind("resource_limit: memory", 0) == 0);
  world.close_and_check_clean();
}

TEST_CASE("a limit set to 0 means none, and the pool warns about it at start") {
  HostileWorld world;
  PoolOptions o = default_limits(SeccompProfile::kStrict);
  o.sandbox.limits.address_space = 0;
  o.sandbox.limits.file_size = 0;
  world.start(o);
  CHECK(world.log().count(
            "[hostile] limits set to 0, none applied: limits.memory, limits.file_size") == 1);
  const TaskResult echo = world.attack("echo", "which worker");
  REQUIRE(echo.state == TaskState::kCompleted);
  const std::int32_t pid = echo.history.back().worker_pid;
  CHECK(soft_limit(pid, "Max address space") == -1);
  CHECK(soft_limit(pid, "Max file size") == -1);
  CHECK(soft_limit(pid, "Max processes") == 256);
  world.close_and_check_clean();
}

// The backstop itself, set low: no per-task cpu_time, a timeout far away, and a busy loop.
TEST_CASE("a worker that reaches its lifetime CPU limit ends resource_limit: cpu") {
  HostileWorld world;
  PoolOptions o = hostile_options(hostile::integration_plugin("hang"));
  o.sandbox.limits.cpu_seconds = 1;
  o.timeout = std::chrono::seconds(60);
  world.start(o);
  const TaskResult r = world.attack("hang", "");
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error == "resource_limit: cpu");
  world.close_and_check_clean();
}
