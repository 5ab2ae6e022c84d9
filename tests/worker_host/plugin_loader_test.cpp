// The plugin loader, in-process, against plugins compiled as strict C99 with hidden
// visibility (tests/worker_host/plugins): the ABI's compile test and its load checks.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <sandpool/base/unique_fd.hpp>

#include "host_api.hpp"
#include "plugin_loader.hpp"
#include "worker_host/local_channel.hpp"
#include "worker_host/worker_harness.hpp"

using sandpool::Code;
using sandpool::UniqueFd;
using sandpool::testing::LocalChannel;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::worker::HostApi;
using sandpool::worker::HostLimits;
using sandpool::worker::LoadedPlugin;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The plugin at `path` opened the way the manager opens it (worker_process.cpp): its
// directory, then the file in it. Owns both fds.
struct OpenedPlugin {
  explicit OpenedPlugin(const std::string& path)
      : name(path),
        dir(::open(std::filesystem::path(path).parent_path().c_str(),
                   O_PATH | O_DIRECTORY | O_CLOEXEC)),
        file(::openat(dir.get(), std::filesystem::path(path).filename().c_str(),
                      O_RDONLY | O_CLOEXEC)) {
    REQUIRE(dir);
    REQUIRE(file);
  }
  sandpool::worker::PluginFile files() const { return {name, file.get(), dir.get()}; }
  std::string name;
  UniqueFd dir;
  UniqueFd file;
};

sandpool::Result<LoadedPlugin> load(const std::string& path) {
  const OpenedPlugin opened(path);
  return LoadedPlugin::load(opened.files());  // the fds may close once it is loaded
}

}  // namespace

TEST_CASE("a C99 plugin built against plugin.h loads, declares its types and serves a task") {
  auto plugin = load(test_plugin_path("abi_probe"));
  INFO(plugin.status().to_string());
  REQUIRE(plugin.is_ok());

  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  REQUIRE(plugin->init(host.table(), "{}").is_ok());
  auto types = plugin->task_types();
  REQUIRE(types.is_ok());
  CHECK(types->size() == 9);
  CHECK(types->front() == "echo");
  CHECK(types->back() == "wait-cancel");

  const std::string payload = "hello";
  sp_task task{};
  task.size = sizeof(sp_task);
  task.attempt = 1;
  task.id = 5;
  task.type = "echo";
  task.type_len = 4;
  task.payload = reinterpret_cast<const std::uint8_t*>(payload.data());
  task.payload_len = payload.size();
  task.deadline_ms = -1;
  sp_call* call = host.begin_task(5);
  CHECK(plugin->handle(&task, call) == SP_OK);
  CHECK(host.end_task().result == "hello");
  plugin->shutdown();
}

TEST_CASE("a plugin without sp_plugin_task_types declares no types") {
  auto plugin = load(test_plugin_path("big_result"));
  REQUIRE(plugin.is_ok());
  auto types = plugin->task_types();
  REQUIRE(types.is_ok());
  CHECK(types->empty());
}

TEST_CASE("every example plugin loads and declares the task type it is named after") {
  const std::string name = GENERATE("echo", "upper", "sleep", "cpu", "alloc", "fail", "flaky",
                                    "crash", "progress", "chaos");
  auto plugin = load(plugin_path(name));
  INFO(plugin.status().to_string());
  REQUIRE(plugin.is_ok());
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  REQUIRE(plugin->init(host.table(), "{}").is_ok());
  auto types = plugin->task_types();
  REQUIRE(types.is_ok());
  CHECK(*types == std::vector<std::string>{name});
  plugin->shutdown();
}

TEST_CASE("the loader refuses a plugin with a clear error") {
  struct Case {
    std::string path;
    Code code;
    std::string needle;
  };
  // (A missing file never gets here: the manager cannot open it, and says so.)
  const Case c =
      GENERATE(Case{test_plugin_path("missing_handle"), Code::kPlugin,
                    "lacks required symbol 'sp_plugin_handle'"},
               Case{test_plugin_path("abi_v2"), Code::kPlugin,
                    "reports ABI version 2; this host implements ABI version 1"},
               Case{std::string(SANDPOOL_SOURCE_DIR) + "/worker_host/include/sandpool/plugin.h",
                    Code::kPlugin, "cannot be loaded"});
  auto plugin = load(c.path);
  REQUIRE_FALSE(plugin.is_ok());
  INFO(plugin.status().to_string());
  CHECK(plugin.status().code() == c.code);
  CHECK(contains(plugin.status().message(), c.needle));
}

TEST_CASE("a failing init is reported with its return value after the plugin's own log") {
  auto plugin = load(test_plugin_path("init_fails"));
  REQUIRE(plugin.is_ok());
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  sandpool::Status s = plugin->init(host.table(), "{}");
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.code() == Code::kPlugin);
  CHECK(contains(s.message(), "returned 7"));
  auto logs = channel.drain_logs();
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].level == 3);
  CHECK(logs[0].id == 0);
  CHECK(contains(logs[0].text, "no model configured"));
  plugin->shutdown();  // init failed: no sp_plugin_shutdown
}

TEST_CASE("init receives the config as NUL-terminated JSON") {
  auto plugin = load(test_plugin_path("abi_probe"));
  REQUIRE(plugin.is_ok());
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  // abi_probe returns 5 for a config mentioning "fail", 2 if the config is not terminated.
  sandpool::Status s = plugin->init(host.table(), R"({"mode": "fail"})");
  CHECK(contains(s.message(), "returned 5"));
}

TEST_CASE("the loader runs the file it was handed, whatever is at its path by then") {
  // The manager opens and checks the plugin; someone then puts another plugin at its path.
  char dir_template[] = "/tmp/sp-swap-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/libplugin.so";
  std::filesystem::copy_file(plugin_path("echo"), path);
  const OpenedPlugin opened(path);
  std::filesystem::copy_file(plugin_path("upper"), dir + "/other.so");
  std::filesystem::rename(dir + "/other.so", path);

  auto plugin = LoadedPlugin::load(opened.files());
  REQUIRE(plugin.is_ok());
  auto types = plugin->task_types();
  REQUIRE(types.is_ok());
  CHECK(*types == std::vector<std::string>{"echo"});  // what was opened, not what is there
  std::filesystem::remove_all(dir);
}

TEST_CASE("a plugin's own library beside it resolves through $ORIGIN, by the directory's fd") {
  auto plugin = load(test_plugin_path("with_library"));
  INFO(plugin.status().to_string());
  REQUIRE(plugin.is_ok());
  REQUIRE(plugin->libraries_loaded_beside().size() == 1);
  CHECK(plugin->libraries_loaded_beside()[0].ends_with("/libsp_beside.so"));
  CHECK(plugin->libraries_loaded_beside()[0].starts_with("/proc/self/fd/"));
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  REQUIRE(plugin->init(host.table(), "{}").is_ok());
  plugin->shutdown();
}

TEST_CASE("a library the plugin needs beside it that is missing is named in the error") {
  char dir_template[] = "/tmp/sp-nolib-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/libwith_library.so";
  std::filesystem::copy_file(test_plugin_path("with_library"), path);  // without its library
  auto plugin = load(path);
  REQUIRE_FALSE(plugin.is_ok());
  INFO(plugin.status().to_string());
  CHECK(plugin.status().code() == Code::kPlugin);
  CHECK(contains(plugin.status().message(), "libsp_beside.so"));
  std::filesystem::remove_all(dir);
}
