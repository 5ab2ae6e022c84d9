// Write-xor-execute after ready (docs/security.md, "Write-xor-execute"): a plugin that writes
// machine code and tries to run it. Under strict (the default) neither an anonymous
// read-write-execute mapping nor a read-write one made executable can be had; with
// sandbox.write_xor_execute: false both run, which shows the attack is real. A worker whose
// init left a writable and executable mapping is refused.
#include <catch2/catch.hpp>

#include <string>

#include "hostile_world.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;
using sandpool::sandbox::SeccompProfile;

TEST_CASE("under strict, shellcode in a writable and executable mapping cannot be created") {
  HostileWorld world;
  world.start(hostile_options());
  const TaskResult r = world.attack("write_exec", "");
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "rwx: Operation not permitted; rw then rx: Operation not permitted");
  world.close_and_check_clean();
}

TEST_CASE("with write_xor_execute off, or under relaxed by default, the same shellcode runs") {
  const bool relaxed = GENERATE(false, true);
  INFO((relaxed ? "relaxed, its default" : "strict, write_xor_execute: false"));
  HostileWorld world;
  PoolOptions o = hostile_options();
  if (relaxed) {
    o.sandbox.profile = SeccompProfile::kRelaxed;
  } else {
    o.sandbox.write_xor_execute = false;
  }
  world.start(o);
  const TaskResult r = world.attack("write_exec", "");
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "rwx: ran 42; rw then rx: ran 42");
  world.close_and_check_clean();
}

TEST_CASE("relaxed with write_xor_execute on refuses the shellcode too") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  o.sandbox.profile = SeccompProfile::kRelaxed;
  o.sandbox.write_xor_execute = true;
  world.start(o);
  const TaskResult r = world.attack("write_exec", "");
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "rwx: Operation not permitted; rw then rx: Operation not permitted");
  world.close_and_check_clean();
}

TEST_CASE("a worker whose init left a writable and executable mapping is refused under strict") {
  HostileWorld world;
  PoolOptions o = hostile_options(hostile_plugin("hostile_init"));
  o.plugin_config_json = R"({"init_rwx": true})";
  o.max_init_failures = 1;
  const auto refused = world.try_start(o);
  REQUIRE_FALSE(refused);
  INFO(refused.status().to_string());
  CHECK(refused.status().code() == Code::kPlugin);
  CHECK(refused.status().message().find("libhostile_init.so' refused: a mapping both writable "
                                        "and executable is left after init (") !=
        std::string::npos);
  CHECK(refused.status().message().find("write_xor_execute: false") != std::string::npos);
  world.require_pools_serve();
  world.close_and_check_clean();
  // The same init with write_xor_execute off starts.
  HostileWorld allowed;
  o.sandbox.write_xor_execute = false;
  allowed.start(o);
  allowed.close_and_check_clean();
}
