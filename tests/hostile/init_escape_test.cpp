// Hostile plugins that attack from sp_plugin_init, before the sandbox closes: a process or
// a thread started there would run on, outside the sandbox, once the worker is ready
// (docs/architecture.md, "Guarantees").
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sandpool/sandbox/lockdown.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::skip_test;
using sandpool::sandbox::SeccompProfile;
using sandpool::testing::kPatience;

namespace {

// A path in the host's /tmp that any user may create, and that nobody has: what a helper
// outside the sandbox would create. Removed at the end.
class Target {
 public:
  Target()
      : path_("/tmp/sandpool-hostile-init-" + std::to_string(::getpid()) + "-" +
              std::to_string(++count_)) {
    std::filesystem::remove(path_);
  }
  ~Target() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }
  bool exists() const { return std::filesystem::exists(path_); }
  // Returns true iff the file appears within `bound` (only asked when an escape is under way).
  bool appears_within(std::chrono::seconds bound) const {
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!exists() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    return exists();
  }

 private:
  static inline int count_ = 0;
  std::string path_;
};

// A world-readable secret in a world-readable directory of its own, removed at the end.
class InitSecret {
 public:
  InitSecret()
      : dir_(std::filesystem::temp_directory_path() /
             ("sandpool-hostile-init-secret-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    std::ofstream(path()) << text();
    ::chmod(dir_.c_str(), 0755);
    ::chmod(path().c_str(), 0644);
  }
  ~InitSecret() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path() const { return (dir_ / "secret").string(); }
  static std::string text() { return "the-init-thread-secret-51c2"; }

 private:
  std::filesystem::path dir_;
};

std::string config_string(const std::string& key, const std::string& value) {
  return "{\"" + key + "\": \"" + value + "\"}";
}

PoolOptions init_options(SeccompProfile profile, std::string config) {
  PoolOptions o = hostile_options(hostile_plugin("hostile_init"));
  o.sandbox.profile = profile;
  o.plugin_config_json = std::move(config);
  return o;
}

// What the plugin's init recorded, asked of a ready worker.
std::string init_report(HostileWorld& world) {
  const TaskResult r = world.attack("init_report", "");
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  return r.result;
}

// The plugin's init left threads running; Landlock is what must hold them.
int landlock_abi_or_skip() {
  const sandbox::LandlockProbe probe = sandbox::probe_landlock();
  if (probe.abi == 0) skip_test("no Landlock: " + probe.unavailable);
  return probe.abi;
}

// The namespaces a case's pool asks for: none (the vfork spawner), or a user and a pid
// namespace (the clone3 spawner; the worker is pid 1 of its namespace but, without a mount
// namespace, sees the host's /proc, whose pids are not its own).
sandbox::NamespaceSet namespaces_for(bool clone3) {
  sandbox::NamespaceSet ns;
  if (clone3) {
    ns.add(sandbox::Namespace::kUser);
    ns.add(sandbox::Namespace::kPid);
  }
  return ns;
}

void require_refused(const Result<std::unique_ptr<Pool>>& p, const std::string& words) {
  REQUIRE_FALSE(p);
  INFO(p.status().to_string());
  CHECK(p.status().code() == Code::kPlugin);
  CHECK(p.status().message().find("libhostile_init.so' refused: ") != std::string::npos);
  CHECK(p.status().message().find(words) != std::string::npos);
}

}  // namespace

TEST_CASE("a fork in init is refused, so no helper outlives init outside the sandbox") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile));
  Target target;
  HostileWorld world;
  world.start(init_options(profile, config_string("init_fork", target.path())));
  const std::string report = init_report(world);
  INFO(report);
  CHECK(report == "fork: refused (Operation not permitted)");
  if (report.rfind("fork: child", 0) == 0) {
    // The helper escaped: it waits for the worker to be ready, then writes as it likes.
    CHECK_FALSE(target.appears_within(kPatience));
  }
  world.close_and_check_clean();
  CHECK_FALSE(target.exists());
}

TEST_CASE("a fork in init is refused under the namespace spawner too", "[needs-ns]") {
  Target target;
  HostileWorld world;
  PoolOptions o = init_options(SeccompProfile::kStrict, config_string("init_fork", target.path()));
  o.sandbox.namespaces.wanted = sandbox::NamespaceSet::all();  // clone3, not vfork
  world.start(o);
  const std::string report = init_report(world);
  INFO(report);
  CHECK(report == "fork: refused (Operation not permitted)");
  world.close_and_check_clean();
  CHECK_FALSE(target.exists());
}

TEST_CASE("an exec in init is refused: the worker host stays the worker host") {
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile));
  Target target;
  HostileWorld world;
  // A shell in the worker host's place would write the file and exit during init.
  world.start(init_options(profile, config_string("init_exec", target.path())));
  CHECK(init_report(world) == "exec: refused (Operation not permitted)");
  world.close_and_check_clean();
  CHECK_FALSE(target.exists());
}

// A pool that allows fork (allow_syscalls: [clone]) lets init fork too: the init layer would
// forbid it for good. The check after init is what stops the helper then.
TEST_CASE("a worker whose init left a process running is refused, naming the plugin") {
  const bool clone3 = GENERATE(false, true);
  INFO((clone3 ? "clone3 spawner, pid namespace" : "vfork spawner"));
  Target target;
  HostileWorld world;
  PoolOptions o = init_options(SeccompProfile::kRelaxed, config_string("init_fork", target.path()));
  o.sandbox.allow_syscalls = {"clone"};
  o.sandbox.namespaces.wanted = namespaces_for(clone3);
  o.max_init_failures = 1;
  require_refused(world.try_start(o), "init left 1 process(es) running (pid ");
  world.require_pools_serve();
  world.close_and_check_clean();
  CHECK_FALSE(target.exists());
}

TEST_CASE("a thread started in init cannot read outside the view once the worker is ready",
          "[needs-privs]") {
  landlock_abi_or_skip();
  const bool clone3 = GENERATE(false, true);
  INFO((clone3 ? "clone3 spawner, pid namespace" : "vfork spawner"));
  InitSecret secret;
  HostileWorld world;
  PoolOptions o = init_options(SeccompProfile::kRelaxed, "{\"init_thread\": true}");
  o.sandbox.namespaces.wanted = namespaces_for(clone3);
  world.start(o);
  const TaskResult r = world.attack("thread_open", "read:" + secret.path());
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "refused: Permission denied");
  CHECK(r.result.find(InitSecret::text()) == std::string::npos);
  world.close_and_check_clean();
}

// strict with openat allowed: seccomp lets the thread's open through, Landlock must stop it.
TEST_CASE("a thread started in init cannot create a file once the worker is ready",
          "[needs-privs]") {
  landlock_abi_or_skip();
  Target target;
  HostileWorld world;
  PoolOptions o = init_options(SeccompProfile::kStrict, "{\"init_thread\": true}");
  o.sandbox.allow_syscalls = {"openat", "close"};
  world.start(o);
  const TaskResult r = world.attack("thread_open", "create:" + target.path());
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "refused: Permission denied");
  world.close_and_check_clean();
  CHECK_FALSE(target.exists());
}

TEST_CASE("under strict a thread started in init that opens a file is a sandbox_violation") {
  InitSecret secret;
  HostileWorld world;
  world.start(init_options(SeccompProfile::kStrict, "{\"init_thread\": true}"));
  const TaskResult r = world.attack("thread_open", "read:" + secret.path());
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: openat");
  world.close_and_check_clean();
}

TEST_CASE("a thread of init that will not take Landlock is refused, naming the plugin",
          "[needs-privs]") {
  const int abi = landlock_abi_or_skip();
  const SeccompProfile profile = GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile) << ", Landlock ABI " << abi);
  HostileWorld world;
  PoolOptions o = init_options(profile, "{\"init_deaf_thread\": true}");
  o.max_init_failures = 1;
  if (abi >= 8) {
    world.start(o);  // the kernel restricted the deaf thread itself (LANDLOCK_RESTRICT_SELF_TSYNC)
  } else {
    require_refused(world.try_start(o), "did not restrict itself within 2000 ms");
  }
  world.close_and_check_clean();
}

TEST_CASE("with Landlock required, init may not leave threads the kernel cannot restrict",
          "[needs-privs]") {
  const int abi = landlock_abi_or_skip();
  InitSecret secret;
  HostileWorld world;
  PoolOptions o = init_options(SeccompProfile::kRelaxed, "{\"init_thread\": true}");
  o.sandbox.require = {"landlock"};
  o.max_init_failures = 1;
  if (abi >= 8) {
    world.start(o);
    CHECK(world.attack("thread_open", "read:" + secret.path()).result ==
          "refused: Permission denied");
  } else {
    require_refused(world.try_start(o), "1 thread(s) started by the plugin's init are running");
  }
  world.close_and_check_clean();
}
