// The real sandpool-worker's steps 4 and 6: the privilege drop (as root, which CI is) and
// Landlock, observed from outside (/proc/<pid>/status) and from the plugin (file_access).
// A case that needs root or Landlock skips (ctest's SKIP_RETURN_CODE) only when the kernel
// says so itself (host_probe.hpp).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sandpool/sandbox/lockdown.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include "host_probe.hpp"
#include "public_dir.hpp"
#include "worker_host/worker_harness.hpp"

using namespace sandpool;
using sandpool::ipc::TaskStatus;
using sandpool::testing::PublicDir;
using sandpool::testing::running_as_root;
using sandpool::testing::test_plugin_path;
using sandpool::testing::worker_args;
using sandpool::testing::WorkerHarness;

namespace {

// The "Key:\tvalue" lines of /proc/<pid>/status.
std::map<std::string, std::string> proc_status(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    out[line.substr(0, colon)] = value;
  }
  return out;
}

bool privileged_exited_with(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

sandbox::RunAs nobody() {
  Result<sandbox::RunAs> r = sandbox::resolve_run_as("nobody");
  REQUIRE(r.is_ok());
  return *r;
}

// Runs one task and returns its result ("" and the error on failure).
std::pair<TaskStatus, std::string> run_task(WorkerHarness& w, const std::string& type,
                                            const std::string& payload) {
  static std::uint64_t id = 0;
  w.send(w.task(++id, type, payload));
  auto r = w.next_result();
  REQUIRE(r.has_value());
  return {r->status, r->status == TaskStatus::kOk ? r->data : r->error};
}

std::string errno_text(int err) { return "open: errno " + std::to_string(err); }

}  // namespace

TEST_CASE("as root, a worker runs its plugin as sandbox.user with no capabilities at all") {
  sandpool::testing::require_root("the privilege drop");
  PublicDir dir;
  sandbox::WorkerArgs args = worker_args(dir.copy(test_plugin_path("file_access")));
  args.policy.run_as = nobody();
  args.policy.allow_syscalls = {"getuid", "geteuid", "getgid"};  // for the "ids" task
  auto w = WorkerHarness::spawn(args);
  auto ready = w->expect_ready();
  INFO(w->output());
  REQUIRE(ready.has_value());

  const auto status = proc_status(w->pid());
  const std::string id = std::to_string(args.policy.run_as->uid);
  const std::string gid = std::to_string(args.policy.run_as->gid);
  CHECK(status.at("Uid") == id + "\t" + id + "\t" + id + "\t" + id);
  CHECK(status.at("Gid") == gid + "\t" + gid + "\t" + gid + "\t" + gid);
  std::vector<std::uint32_t> groups;
  std::istringstream listed(status.at("Groups"));
  for (std::uint32_t g; listed >> g;) groups.push_back(g);
  CHECK(groups == args.policy.run_as->groups);
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    INFO(set);
    CHECK(status.at(set) == "0000000000000000");
  }
  CHECK(status.at("NoNewPrivs") == "1");
  CHECK(status.at("Seccomp") == "2");

  CHECK(run_task(*w, "ids", "").second == "uid=" + id + " euid=" + id + " gid=" + gid);
  CHECK(ready->isolation.find("+uid:" + id + "+caps:none+") != std::string::npos);
  CHECK(ready->isolation.ends_with("+seccomp:strict"));
}

TEST_CASE("as root without sandbox.user, the worker stays uid 0 but loses every capability") {
  sandpool::testing::require_root("the privilege drop");
  auto w = WorkerHarness::spawn(worker_args(test_plugin_path("file_access")));
  REQUIRE(w->expect_ready().has_value());
  const auto status = proc_status(w->pid());
  CHECK(status.at("Uid") == "0\t0\t0\t0");
  CHECK(status.at("CapEff") == "0000000000000000");
  CHECK(status.at("CapBnd") == "0000000000000000");
}

TEST_CASE("as root, a plugin that other users could replace is refused before dlopen") {
  sandpool::testing::require_root("the check of a plugin others could replace");
  PublicDir dir;
  struct Case {
    const char* what;
    mode_t file_mode;
    mode_t dir_mode;
    const char* needle;
  };
  const Case c =
      GENERATE(Case{"group-writable file", 0664, 0755, "is group-writable (mode 0664)"},
               Case{"world-writable file", 0646, 0755, "is world-writable (mode 0646)"},
               Case{"world-writable directory", 0644, 0777, "plugin directory " /* path */});
  INFO(c.what);
  const std::string plugin = dir.copy(test_plugin_path("file_access"), c.file_mode);
  REQUIRE(::chmod(dir.path().c_str(), c.dir_mode) == 0);
  sandbox::WorkerArgs args = worker_args(plugin);
  args.policy.run_as = nobody();
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(privileged_exited_with(status, sandbox::kExitLoad));
  CHECK(w->logged(c.needle));
  CHECK(w->logged("refused when running as root"));
}

TEST_CASE("after init, Landlock leaves only the plugin's, the libraries' and configured paths") {
  sandpool::testing::require_landlock();
  const int abi = sandpool::testing::landlock_abi();
  PublicDir plugin_dir, secrets, allowed;
  const std::string secret = secrets.write("secret", "do not read me");
  const std::string beside = plugin_dir.write("beside.txt", "data next to the plugin");
  const std::string extra = allowed.write("model.bin", "configured read-only data");
  sandbox::WorkerArgs args = worker_args(plugin_dir.copy(test_plugin_path("file_access")));
  if (running_as_root()) args.policy.run_as = nobody();
  args.policy.profile = sandbox::SeccompProfile::kRelaxed;
  args.policy.allow_syscalls = {"openat"};  // seccomp lets writes through: Landlock decides
  args.policy.readonly_paths = {allowed.path()};
  args.policy.init.read_paths = {secrets.path()};                     // init may read it
  args.plugin_config_json = R"({"init_read": ")" + secret + R"("})";  // and does
  auto w = WorkerHarness::spawn(args);
  auto ready = w->expect_ready();
  INFO(w->output());
  REQUIRE(ready.has_value());
  CHECK(ready->isolation.find("+landlock:v" + std::to_string(std::min(abi, 7)) + "+") !=
        std::string::npos);

  CHECK(run_task(*w, "read", secret) == std::pair{TaskStatus::kFail, errno_text(EACCES)});
  CHECK(run_task(*w, "read", "/etc/passwd") == std::pair{TaskStatus::kFail, errno_text(EACCES)});
  CHECK(run_task(*w, "read", beside).second == "read 23 bytes");
  CHECK(run_task(*w, "read", extra).second == "read 25 bytes");
  CHECK(run_task(*w, "write", plugin_dir.path() + "/new") ==
        std::pair{TaskStatus::kFail, errno_text(EACCES)});
  CHECK(run_task(*w, "write", beside) == std::pair{TaskStatus::kFail, errno_text(EACCES)});
}

TEST_CASE("a configured read-only path that does not exist fails step 5, naming it") {
  sandpool::testing::require_landlock();
  sandbox::WorkerArgs args = worker_args(test_plugin_path("file_access"));
  const bool init_path = GENERATE(false, true);
  INFO((init_path ? "sandbox.init.read_paths" : "sandbox.readonly_paths"));
  (init_path ? args.policy.init.read_paths
             : args.policy.readonly_paths) = {"/nonexistent/sandpool-data"};
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(privileged_exited_with(status, sandbox::kExitLockdown));
  CHECK(w->logged("lock-down step 5 (init Landlock): open(/nonexistent/sandpool-data, O_PATH)"));
}

TEST_CASE("init reads only what the pool declares: another file fails init, naming the key") {
  sandpool::testing::require_landlock();
  PublicDir secrets;
  const std::string secret = secrets.write("secret", "world-readable, outside the paths");
  sandbox::WorkerArgs args = worker_args(test_plugin_path("file_access"));
  args.plugin_config_json = R"({"init_read": ")" + secret + R"("})";
  auto w = WorkerHarness::spawn(args);
  auto status = w->wait_exit();
  INFO(w->output());
  CHECK(privileged_exited_with(status, sandbox::kExitInit));
  CHECK(w->logged("returned 4 (init failed)"));
  CHECK(
      w->logged("init is confined: it reads only the plugin's directory, its libraries, "
                "sandbox.readonly_paths and sandbox.init.read_paths"));
  // Declared, the same init reads it.
  args.policy.init.read_paths = {secrets.path()};
  auto declared = WorkerHarness::spawn(args);
  INFO(declared->output());
  CHECK(declared->expect_ready().has_value());
}

TEST_CASE("each lock-down step is logged once per worker start, at debug level") {
  auto w = WorkerHarness::spawn(worker_args(test_plugin_path("file_access")));
  REQUIRE(w->expect_ready().has_value());
  for (int step = 1; step <= 7; ++step) {
    const std::string prefix = "lock-down step " + std::to_string(step) + ":";
    int seen = 0;
    for (const ipc::LogMsg& m : w->logs()) {
      if (m.text.starts_with(prefix)) {
        ++seen;
        CHECK(m.level == 0);
      }
    }
    INFO(prefix);
    CHECK(seen == 1);
  }
}

TEST_CASE("as root, a plugin under a directory sandbox.user cannot search loads and serves") {
  sandpool::testing::require_root("the privilege drop to sandbox.user");
  // A checkout under /root: a 0700 directory above a 0755 plugin directory, which holds the
  // plugin and the library it finds through $ORIGIN. Only the harness (root) opens them.
  char closed_template[] = "/tmp/sp-closed-XXXXXX";
  REQUIRE(::mkdtemp(closed_template) != nullptr);  // mode 0700
  const std::string closed = closed_template;
  const std::string plugins = closed + "/build/plugins";
  std::filesystem::create_directories(plugins);
  for (const std::string& d : {closed + "/build", plugins}) REQUIRE(::chmod(d.c_str(), 0755) == 0);
  const std::string built = test_plugin_path("with_library");
  const std::string plugin = PublicDir::copy_to(plugins, built, 0644);
  PublicDir::copy_to(
      plugins, (std::filesystem::path(built).parent_path() / "libsp_beside.so").string(), 0644);
  REQUIRE(::access(closed.c_str(), F_OK) == 0);

  sandbox::WorkerArgs args = worker_args(plugin);
  args.policy.run_as = nobody();
  auto w = WorkerHarness::spawn(args);
  auto ready = w->expect_ready();
  INFO(w->output());
  REQUIRE(ready.has_value());
  CHECK(ready->task_types == std::vector<std::string>{"shout"});
  CHECK(run_task(*w, "shout", "hello") ==
        std::pair{TaskStatus::kOk, std::string("HELLO (from beside)")});
  // Landlock granted the plugin's directory through its fd, and said which one.
  if (sandbox::probe_landlock().abi > 0) CHECK(w->logged(plugins + " (by fd)"));
  w.reset();
  std::filesystem::remove_all(closed);
}
