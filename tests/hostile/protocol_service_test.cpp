// Hostile plugins against poold itself (a real poold, its socket and the real Client): a
// plugin that declares another pool's task type to receive its payloads, and a worker that
// floods its submitter with forged progress frames
// (tests/hostile/plugins/hostile_protocol.c).
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <mutex>
#include <set>

#include <sandpool/client.hpp>
#include <sandpool/ipc/messages.hpp>

#include "hostile_protocol.hpp"
#include "poold/poold_process.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using nlohmann::json;
using sandpool::hostile::forge_order;
using sandpool::hostile::hex;

namespace {

std::string protocol_plugin() {
  return std::string(SANDPOOL_HOSTILE_PLUGIN_DIR) + "/libhostile_protocol.so";
}

// A pool of the hostile_protocol plugin named `name`, with `config` (a YAML flow mapping).
std::string hostile_pool_yaml(const std::string& name, const std::string& config,
                              const std::string& profile = "strict") {
  return "  - name: " + name + "\n    plugin: " + protocol_plugin() +
         "\n    workers: {min: 1, max: 2, initial: 1}\n    plugin_config: " + config +
         "\n    sandbox: {profile: " + profile +
         "}\n    task_defaults: {retries: 0, timeout: 60s}\n";
}

// Declares "echo" (the victim's type) besides its own, and marks the echoes it serves.
const std::string kThiefConfig =
    "{declare_hex: \"" + hex("echo") + "," + hex("forge") + "\", capture: true}";

}  // namespace

TEST_CASE("a plugin declaring another pool's task type keeps poold from starting, naming both") {
  TempDir dir;
  const auto config = dir.path / "poold.yaml";
  write_file(config, service_yaml(dir.path) + "pools:\n" + pool_yaml("victim", "echo") +
                         hostile_pool_yaml("thief", kThiefConfig));
  PooldProcess poold(config);
  const bool refused =
      poold.wait_for_output("task type 'echo' of pool 'thief' is already served by pool 'victim'");
  INFO(poold.output());
  REQUIRE(refused);
  CHECK(poold.wait_exit() == 1);
}

TEST_CASE("a reload adding a pool that declares another pool's type reports it, no task moves") {
  PooldFixture f("pools:\n" + pool_yaml("victim", "echo"));
  Client c = f.connect();
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" + pool_yaml("victim", "echo") +
                           hostile_pool_yaml("thief", kThiefConfig));
  auto report = c.reload();
  REQUIRE(report);
  INFO(report->dump());
  REQUIRE((*report)["failed"].size() == 1);
  CHECK((*report)["failed"][0]["pool"] == "thief");
  CHECK((*report)["failed"][0]["error"].get<std::string>().find(
            "task type 'echo' of pool 'thief' is already served by pool 'victim'") !=
        std::string::npos);
  CHECK((*report)["added"].empty());
  // "echo" still goes to the victim ("thief" would sort first in the routing table).
  auto r = c.submit_wait(task("echo", "secret"));
  REQUIRE(r);
  CHECK(r->state == "completed");
  CHECK(r->result == "secret");
  auto status = c.status();
  REQUIRE(status);
  CHECK((*status)["pools"].size() == 1);
}
