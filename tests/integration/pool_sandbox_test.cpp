// The sandbox through a real Pool: seccomp profiles and per-pool additions, the privilege
// drop to sandbox.user (as root, which CI is; skipped through ctest's SKIP_RETURN_CODE
// otherwise) and the isolation the workers report.
#include <catch2/catch.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "host_probe.hpp"
#include "public_dir.hpp"
#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::PublicDir;
using sandpool::testing::run;

namespace {

const std::string kForbidden = SANDPOOL_WH_TEST_PLUGIN_DIR "/libforbidden_syscall.so";

// A logger whose lines a test can read.
struct CapturedLog {
  std::shared_ptr<std::ostringstream> out = std::make_shared<std::ostringstream>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(
      "sandbox-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(*out));
  CapturedLog() { logger->set_level(spdlog::level::debug); }
  std::string text() const {
    logger->flush();
    return out->str();
  }
};

// The "Uid:" line of /proc/<pid>/status: real, effective, saved, filesystem.
std::string uid_line(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Uid:")) return line.substr(line.find_first_not_of(" \t", 4));
  }
  return "";
}

}  // namespace

TEST_CASE("under every filtering profile a forbidden syscall is a sandbox_violation, logged") {
  const sandbox::SeccompProfile profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  INFO(sandbox::profile_name(profile));
  CapturedLog log;
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = kForbidden;
  o.sandbox.profile = profile;
  o.logger = log.logger;
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "x");
  CHECK(r.state == TaskState::kDeadLettered);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: socket");
  pool->close();
  const std::string text = log.text();
  INFO(text);
  CHECK(text.find("(sandbox_violation: socket)") != std::string::npos);
}

TEST_CASE("a pool's allow_syscalls let its plugin make that call, off filters nothing") {
  CapturedLog log;
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = kForbidden;
  o.logger = log.logger;
  SECTION("allow_syscalls: [socket] on the strict profile") {
    o.sandbox.allow_syscalls = {"socket"};
  }
  SECTION("profile off, with a loud warning") { o.sandbox.profile = sandbox::SeccompProfile::kOff; }
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "x");
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "socket allowed");
  pool->close();
  if (o.sandbox.profile == sandbox::SeccompProfile::kOff) {
    CHECK(log.text().find("SECCOMP IS OFF") != std::string::npos);
  }
}

TEST_CASE("as root, a pool's workers run as sandbox.user and report what isolates them") {
  sandpool::testing::require_root("the privilege drop");
  PublicDir dir;
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = dir.copy(o.plugin_path);
  std::string expected_uid = "65534";  // the default, nobody
  SECTION("the default user") { CHECK(o.user == "nobody"); }
  SECTION("a numeric uid unknown to the user database") {
    o.user = "4000123";
    expected_uid = "4000123";
  }
  auto pool = make_pool(o);
  CHECK(run(*pool, pool->task_types().front(), "hi").result == "hi");
  const auto workers = pool->workers();
  REQUIRE(workers.size() == 1);
  const WorkerInfo& w = workers[0];
  CHECK(uid_line(w.pid) ==
        expected_uid + "\t" + expected_uid + "\t" + expected_uid + "\t" + expected_uid);
  INFO(w.isolation);
  CHECK(w.isolation.starts_with("rlimits+uid:" + expected_uid + "+caps:none+"));
  CHECK(w.isolation.ends_with("+seccomp:strict"));
}

TEST_CASE("as root, a plugin other users could replace, or an unknown user, fails the start") {
  sandpool::testing::require_root("the checks of a replaceable plugin and of the user");
  PublicDir dir;
  PoolOptions o = pool_options("echo", 1);
  std::string needle;
  SECTION("a group-writable plugin") {
    o.plugin_path = dir.copy(o.plugin_path, 0664);
    needle = "plugin " + o.plugin_path + " is group-writable (mode 0664)";
  }
  SECTION("a user the database does not know") {
    o.user = "no-such-user-sandpool";
    needle = "sandbox.user: no user named 'no-such-user-sandpool'";
  }
  auto pool = Pool::create(o);
  REQUIRE_FALSE(pool);
  INFO(pool.status().to_string());
  CHECK(pool.status().message().find(needle) != std::string::npos);
}
