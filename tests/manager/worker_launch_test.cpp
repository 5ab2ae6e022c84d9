// WorkerProcess::start's side of the launch contract (worker_args.hpp), on a spawner that
// only records what it was asked: the worker host and the plugin handed over as open files,
// the environment reduced to keep_env, the plugin config kept off the command line, and a
// plugin that cannot be opened refused before anything is spawned.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "host_probe.hpp"
#include "supervision/worker_process.hpp"

using namespace sandpool;
using namespace sandpool::supervision;

namespace {

// What an fd of the request names: readlink of /proc/self/fd/N, taken during spawn().
std::string fd_target(int fd) {
  char buf[4096];
  const ssize_t n =
      ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

class RecordingSpawner final : public Spawner {
 public:
  Result<ChildProcess> spawn(const SpawnRequest& req) override {
    ++spawns;
    request = req;
    executable_target = fd_target(req.executable_fd);
    for (auto [child_fd, parent_fd] : req.fds) targets[child_fd] = fd_target(parent_fd);
    return ChildProcess(4321, UniqueFd());
  }
  int spawns = 0;
  SpawnRequest request;
  std::string executable_target;
  std::map<int, std::string> targets;  // child fd -> what it names
};

// A scratch directory (0755) holding a stand-in plugin; removed with the object.
struct PluginDir {
  PluginDir() {
    char tmpl[] = "/tmp/sp-launch-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
    REQUIRE(::chmod(path.c_str(), 0755) == 0);
    plugin = path + "/libplugin.so";
    std::filesystem::copy_file("/bin/true", plugin);  // any regular file stands for a plugin
    REQUIRE(::chmod(plugin.c_str(), 0644) == 0);
  }
  ~PluginDir() { std::filesystem::remove_all(path); }
  std::string path;
  std::string plugin;
};

LaunchSpec spec_for(const std::string& plugin) {
  LaunchSpec spec;
  spec.worker_path = "/bin/true";  // stands for the worker host
  spec.args.plugin_path = plugin;
  return spec;
}

bool has_arg(const SpawnRequest& r, const std::string& a) {
  return std::find(r.args.begin(), r.args.end(), a) != r.args.end();
}

}  // namespace

TEST_CASE("the worker host and the plugin reach the child as the files the manager opened") {
  PluginDir dir;
  RecordingSpawner spawner;
  auto proc = WorkerProcess::start(spawner, spec_for(dir.plugin));
  REQUIRE(proc);
  CHECK(spawner.request.executable == "/bin/true");
  CHECK(spawner.request.executable_fd >= 0);
  CHECK(spawner.executable_target == std::filesystem::canonical("/bin/true").string());
  CHECK(spawner.targets.at(6) == dir.plugin);
  CHECK(spawner.targets.at(7) == dir.path);
  CHECK(has_arg(spawner.request, "--plugin-fd"));
  CHECK(has_arg(spawner.request, "--plugin-dir-fd"));
  CHECK(has_arg(spawner.request, dir.plugin));  // its name, for messages
}

TEST_CASE("the child's environment is keep_env's, and the config is not on its command line") {
  PluginDir dir;
  ::setenv("SP_LAUNCH_KEPT", "yes", 1);
  ::setenv("SP_LAUNCH_SECRET", "manager-only", 1);
  LaunchSpec spec = spec_for(dir.plugin);
  spec.args.policy.keep_env = {"SP_LAUNCH_KEPT"};
  spec.args.plugin_config_json = R"({"token": "cfg-only-in-the-region"})";
  RecordingSpawner spawner;
  auto proc = WorkerProcess::start(spawner, spec);
  REQUIRE(proc);
  CHECK(spawner.request.env == std::vector<std::string>{"SP_LAUNCH_KEPT=yes"});
  for (const std::string& arg : spawner.request.args) {
    CHECK(arg.find("cfg-only-in-the-region") == std::string::npos);
  }
  ::unsetenv("SP_LAUNCH_KEPT");
  ::unsetenv("SP_LAUNCH_SECRET");
}

TEST_CASE("a plugin that cannot be opened as a regular file is refused before any spawn") {
  // (the plugin's name in the scratch directory, or an absolute path; what the error says)
  const auto [name, needle] = GENERATE(table<std::string, std::string>({
      {"libnothing.so", "libnothing.so' does not exist"},
      {"/nonexistent/libx.so", "plugin directory '/nonexistent' does not exist"},
      {"libfifo.so", "is not a regular file"},  // a FIFO: a plain open() would block for good
      {"libdir.so", "is not a regular file"},
  }));
  PluginDir dir;
  REQUIRE(::mkfifo((dir.path + "/libfifo.so").c_str(), 0644) == 0);
  REQUIRE(::mkdir((dir.path + "/libdir.so").c_str(), 0755) == 0);
  const std::string plugin = name.starts_with('/') ? name : dir.path + "/" + name;
  INFO(plugin);
  RecordingSpawner spawner;
  auto proc = WorkerProcess::start(spawner, spec_for(plugin));
  REQUIRE_FALSE(proc);
  INFO(proc.status().to_string());
  CHECK(proc.status().code() == Code::kPlugin);
  CHECK(proc.status().message().find(needle) != std::string::npos);
  CHECK(spawner.spawns == 0);
}

TEST_CASE("as root, a plugin others could replace is refused at the spawn, on the opened file") {
  sandpool::testing::require_root("refusing a plugin others could replace (a check made as root)");
  PluginDir dir;
  REQUIRE(::chmod(dir.plugin.c_str(), 0666) == 0);
  RecordingSpawner spawner;
  auto proc = WorkerProcess::start(spawner, spec_for(dir.plugin));
  REQUIRE_FALSE(proc);
  CHECK(proc.status().message().find("is world-writable (mode 0666)") != std::string::npos);
  CHECK(spawner.spawns == 0);
}
