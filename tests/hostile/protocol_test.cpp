// Hostile workers that keep the channel's framing but break its conversation, and plugins
// that declare what they should not (tests/hostile/plugins/hostile_protocol.c). The cases
// that need poold's routing and its control connections are in protocol_service_test.cpp.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdio>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>

#include "hostile_protocol.hpp"
#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::forge_order;
using sandpool::hostile::hex;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;

TEST_CASE("a worker that repeats its Ready is a protocol_error at the second one") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile));
  HostileWorld world;
  PoolOptions o = hostile_options(hostile_plugin("hostile_protocol"));
  o.sandbox.profile = profile;
  o.timeout = 30s;  // the manager must notice, not the timeout
  world.start(o);
  ipc::ReadyMsg ready;
  ready.pid = 1;
  ready.task_types = {"echo", "forge", "more"};
  ready.isolation = "forged";
  std::string frame;
  ipc::encode(ready, &frame);
  const TaskResult r =
      world.attack("forge", forge_order(ipc::MsgKind::kReady, 200, false, "wait", frame));
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == Outcome::kProtocolError);
  CHECK(r.history[0].error.find("a second Ready message") != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("a plugin's declared task types are capped and must be printable") {
  const auto [what, config, error] = GENERATE(table<std::string, std::string, std::string>({
      {"65 types", R"({"declare_many": 65})", "declares 65 task types (at most 64)"},
      {"a type of 200 bytes", R"({"declare_hex": ")" + hex(std::string(200, 'x')) + R"("})",
       "of 200 bytes (1 to 128)"},
      {"an escape sequence", R"({"declare_hex": ")" + hex("\x1b[2Jecho") + R"("})",
       "(\"\\x1b[2Jecho\") with a byte that is not printable ASCII"},
      {"a space", R"({"declare_hex": ")" + hex("ec ho") + R"("})", "not printable ASCII"},
      {"a type twice", R"({"declare_hex": ")" + hex("a") + "," + hex("a") + R"("})",
       "task type 1 (\"a\") twice"},
  }));
  INFO(what);
  HostileWorld world;
  PoolOptions o = hostile_options(hostile_plugin("hostile_protocol"));
  o.plugin_config_json = config;
  auto pool = world.try_start(o);
  REQUIRE_FALSE(pool);
  INFO(pool.status().to_string());
  CHECK(pool.status().code() == Code::kPlugin);
  CHECK(pool.status().message().find("libhostile_protocol.so") != std::string::npos);
  CHECK(pool.status().message().find(error) != std::string::npos);
  world.close_and_check_clean();
}

TEST_CASE("64 printable declared task types are accepted") {
  HostileWorld world;
  PoolOptions o = hostile_options(hostile_plugin("hostile_protocol"));
  o.plugin_config_json = R"({"declare_many": 64})";
  Pool& pool = world.start(o);
  CHECK(pool.task_types().size() == 64);
  world.close_and_check_clean();
}
