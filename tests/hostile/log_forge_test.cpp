// A hostile plugin that writes terminal escape sequences and forged log lines
// (plugins/log_forge.c): whatever way its text reaches the manager's log (host->log, stdout,
// an init failure), it arrives escaped, one line, and the pools keep serving.
#include <catch2/catch.hpp>

#include <algorithm>

#include "hostile_world.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;

namespace {

// True iff `text` holds a byte that could act on a terminal or split a log line.
bool has_control(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

}  // namespace

TEST_CASE("a plugin's escape sequences and forged lines reach the log escaped, one line each") {
  HostileWorld world;
  world.start(hostile_options(hostile_plugin("log_forge")));
  const TaskResult r = world.attack("forge_log", "");
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "forged");
  // Closed first: a worker's stdout is read beside its ring, and all of it by the time the
  // worker has been reaped.
  world.close_and_check_clean();
  for (const std::string& line : world.log().lines()) {
    INFO(line);
    CHECK_FALSE(has_control(line));
  }
  // Both log() lines: the escapes shown, the forged line inside the plugin's own line.
  const std::string shown =
      "forged by the plugin \\x1b[2J\\x1b]0;pwned\\x07 tail\\n2030-01-01 00:00:00.000 "
      "[critical] poold: forged line";
  CHECK(world.log().count("plugin: " + shown) == 2);
  CHECK(world.log().count("output: stdout with a \\x00 NUL and \\x1b[31mcolour\\x1b[0m") == 1);
}

TEST_CASE(
    "a plugin whose init logs a forged error and fails is refused, and the log shows it escaped") {
  HostileWorld world;
  PoolOptions o = hostile_options(hostile_plugin("log_forge"));
  o.plugin_config_json = R"({"init_forge": true})";
  auto pool = world.try_start(o);
  REQUIRE_FALSE(pool);
  const std::string why = pool.status().message();
  INFO(why);
  CHECK_FALSE(has_control(why));
  CHECK(why.find("returned 1") != std::string::npos);
  // The plugin's error line is in the log, escaped (the pool's error is the worker host's).
  CHECK(world.log().count("plugin: forged by the plugin \\x1b[2J\\x1b]0;pwned\\x07 tail\\n2030") >=
        1);
  for (const std::string& line : world.log().lines()) {
    INFO(line);
    CHECK_FALSE(has_control(line));
  }
  world.require_pools_serve();
  world.close_and_check_clean();
}
