// The plugin loader, in-process, against plugins compiled as strict C99 with hidden
// visibility (tests/worker_host/plugins): the ABI's compile test and its load checks.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "host_api.hpp"
#include "plugin_loader.hpp"
#include "worker_host/local_channel.hpp"
#include "worker_host/worker_harness.hpp"

using sandpool::Code;
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

}  // namespace

TEST_CASE("a C99 plugin built against plugin.h loads, declares its types and serves a task") {
  auto plugin = LoadedPlugin::load(test_plugin_path("abi_probe"));
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
  auto plugin = LoadedPlugin::load(test_plugin_path("big_result"));
  REQUIRE(plugin.is_ok());
  auto types = plugin->task_types();
  REQUIRE(types.is_ok());
  CHECK(types->empty());
}

TEST_CASE("every example plugin loads and declares the task type it is named after") {
  const std::string name = GENERATE("echo", "upper", "sleep", "cpu", "alloc", "fail", "flaky",
                                    "crash", "progress", "chaos");
  auto plugin = LoadedPlugin::load(plugin_path(name));
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
  const Case c =
      GENERATE(Case{"/nonexistent/libnothing.so", Code::kNotFound,
                    "plugin file '/nonexistent/libnothing.so' does not exist"},
               Case{"libecho.so", Code::kInvalidArgument, "is a bare name"},
               Case{test_plugin_path("missing_handle"), Code::kPlugin,
                    "lacks required symbol 'sp_plugin_handle'"},
               Case{test_plugin_path("abi_v2"), Code::kPlugin,
                    "reports ABI version 2; this host implements ABI version 1"},
               Case{std::string(SANDPOOL_SOURCE_DIR) + "/worker_host/include/sandpool/plugin.h",
                    Code::kPlugin, "cannot be loaded"});
  auto plugin = LoadedPlugin::load(c.path);
  REQUIRE_FALSE(plugin.is_ok());
  INFO(plugin.status().to_string());
  CHECK(plugin.status().code() == c.code);
  CHECK(contains(plugin.status().message(), c.needle));
}

TEST_CASE("a failing init is reported with its return value after the plugin's own log") {
  auto plugin = LoadedPlugin::load(test_plugin_path("init_fails"));
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
  auto plugin = LoadedPlugin::load(test_plugin_path("abi_probe"));
  REQUIRE(plugin.is_ok());
  LocalChannel channel;
  HostApi host(channel.worker(), HostLimits{});
  // abi_probe returns 5 for a config mentioning "fail", 2 if the config is not terminated.
  sandpool::Status s = plugin->init(host.table(), R"({"mode": "fail"})");
  CHECK(contains(s.message(), "returned 5"));
}
