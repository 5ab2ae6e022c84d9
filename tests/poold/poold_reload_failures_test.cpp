// Reloads that do not simply apply (docs/operations.md, "Reload"): a new pool that cannot
// start (listed under `failed`, the rest applied), a pool a reload made `failed` (replaced
// by the reload that fixes it), a removed pool (out of routing at once, while it drains what
// it accepted), and a change of `task_types` (a new pool takes the types over). The pools
// run tests/integration's two_types plugin: "alpha" and "beta" tasks answer "<type>:<payload>",
// and {"init": "fail"} in its plugin_config makes its init fail.
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>

#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

std::string two_types_plugin() {
  return std::filesystem::canonical(std::string(SANDPOOL_BIN_DIR) +
                                    "/../test-plugins/libtwo_types.so")
      .string();
}

// A pool of the two_types plugin named `name`, with `extra` YAML lines.
std::string two_types_pool(const std::string& name, const std::string& extra = "") {
  return "  - name: " + name + "\n    plugin: " + two_types_plugin() +
         "\n    workers: {min: 1, max: 2, initial: 1}\n" + extra;
}

// The error code poold answers a submit of `type` with ("" when it is accepted).
std::string submit_refusal(Client& c, const std::string& type) {
  auto s = c.submit(task(type, "x"));
  return s ? "" : error_code_of(s.status());
}

bool status_lists(Client& c, const std::string& name) {
  auto s = as_json(c.status());
  REQUIRE(s);
  for (const auto& p : (*s)["pools"]) {
    if (p["name"] == name) return true;
  }
  return false;
}

TEST_CASE("poold: a reload whose new pool cannot start lists it as failed and applies the rest") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  Client c = f.connect();
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           pool_yaml("echo", "echo", "    dispatch: least-loaded\n") +
                           two_types_pool("broken", "    plugin_config: {init: fail}\n"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  INFO(applied->dump());
  CHECK((*applied)["added"].empty());
  REQUIRE((*applied)["failed"].size() == 1);
  CHECK((*applied)["failed"][0]["pool"] == "broken");
  CHECK_FALSE((*applied)["failed"][0]["error"].get<std::string>().empty());
  CHECK((*applied)["strategy_changed"] == json::array({"echo"}));
  CHECK(status_of(c, "echo")["dispatch"] == "least-loaded");
  CHECK_FALSE(status_lists(c, "broken"));
  CHECK(submit_refusal(c, "alpha") == "not_found");
  CHECK(f.poold->wait_for_output("reload: pool broken could not start"));

  // Fixed in the file: the next reload starts it.
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           pool_yaml("echo", "echo", "    dispatch: least-loaded\n") +
                           two_types_pool("broken"));
  auto fixed = as_json(c.reload());
  REQUIRE(fixed);
  CHECK((*fixed)["added"] == json::array({"broken"}));
  CHECK((*fixed)["failed"].empty());
  auto done = c.submit_wait(task("alpha", "now"));
  REQUIRE(done);
  CHECK(done->result == "alpha:now");
}

TEST_CASE("poold: a pool a reload made failed is replaced by the reload that fixes it") {
  const std::string restart = "    restart: {max_init_failures: 2}\n";
  PooldFixture f("pools:\n" + two_types_pool("two", restart));
  Client c = f.connect();
  auto before = c.submit_wait(task("alpha", "before"));
  REQUIRE(before);
  CHECK(before->result == "alpha:before");

  // A plugin_config its workers cannot init with: the rolling restart's replacements fail,
  // and after max_init_failures of them in a row the pool is failed.
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           two_types_pool("two", restart + "    plugin_config: {init: fail}\n"));
  auto broke = as_json(c.reload());
  REQUIRE(broke);
  REQUIRE((*broke)["reconfigured"].size() == 1);
  CHECK((*broke)["reconfigured"][0]["rolling_restart"] == true);
  REQUIRE(poll_until([&] { return status_of(c, "two")["state"] == "failed"; }));
  CHECK_FALSE(submit_refusal(c, "alpha").empty());

  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" + two_types_pool("two", restart));
  auto fixed = as_json(c.reload());
  REQUIRE(fixed);
  CHECK((*fixed)["replaced"] == json::array({"two"}));
  CHECK((*fixed)["failed"].empty());
  CHECK(status_of(c, "two")["state"] == "running");
  auto after = c.submit_wait(task("beta", "after"));
  REQUIRE(after);
  CHECK(after->result == "beta:after");
}

TEST_CASE("poold: a pool removed by reload leaves routing at once, still running what it has") {
  // shutdown_timeout is long: the removed pool drains rather than dead-letters.
  const std::string service = "  shutdown_timeout: 10m\n";
  const std::string sleep_pool = pool_yaml("sleep", "sleep",
                                           "    concurrency: 1\n"
                                           "    task_defaults: {timeout: 10m}\n");
  PooldFixture f("pools:\n" + sleep_pool + pool_yaml("echo", "echo"), service);
  Client c = f.connect();
  auto holder = c.submit(task("sleep", "600000"));
  REQUIRE(holder);
  REQUIRE(wait_task_state(c, holder->id, "running"));
  auto queued = std::make_shared<std::promise<Result<TaskReply>>>();
  auto queued_done = queued->get_future();
  REQUIRE(c.submit_async(task("sleep", "1"), [queued](Result<TaskReply> r) {
             queued->set_value(std::move(r));
           }).is_ok());
  REQUIRE(poll_until([&] { return status_of(c, "sleep")["queued"] == 1; }));

  write_file(f.config, service_yaml(f.dir.path, service) + "pools:\n" + pool_yaml("echo", "echo"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  CHECK((*applied)["removed"] == json::array({"sleep"}));
  // Gone from routing and from status while its tasks still run in it.
  CHECK(submit_refusal(c, "sleep") == "not_found");
  CHECK_FALSE(status_lists(c, "sleep"));
  CHECK(c.task(holder->id)->state == "running");
  CHECK(queued_done.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);

  REQUIRE(as_json(c.cancel(holder->id)));
  REQUIRE(queued_done.wait_for(kPatience) == std::future_status::ready);
  auto r = queued_done.get();
  REQUIRE(r);
  CHECK(r->state == "completed");  // drained: what it accepted ran
  REQUIRE(f.poold->wait_for_output("pool retired pool=sleep dead_lettered=0"));
  CHECK(submit_refusal(c, "echo").empty());
}

TEST_CASE("poold: a reload that changes task_types hands them to a new pool") {
  PooldFixture f("pools:\n" + two_types_pool("two", "    task_types: [alpha]\n"));
  Client c = f.connect();
  CHECK(status_of(c, "two")["task_types"] == json::array({"alpha"}));
  CHECK(submit_refusal(c, "beta") == "not_found");
  auto alpha = c.submit_wait(task("alpha", "a"));
  REQUIRE(alpha);
  CHECK(alpha->result == "alpha:a");

  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" +
                           two_types_pool("two", "    task_types: [beta]\n"));
  auto applied = as_json(c.reload());
  REQUIRE(applied);
  // A pool's types are its for life: a new pool serves the new ones.
  CHECK((*applied)["replaced"] == json::array({"two"}));
  CHECK((*applied)["reconfigured"].empty());
  CHECK(status_of(c, "two")["task_types"] == json::array({"beta"}));
  CHECK(submit_refusal(c, "alpha") == "not_found");
  auto beta = c.submit_wait(task("beta", "b"));
  REQUIRE(beta);
  CHECK(beta->result == "beta:b");
}

}  // namespace
}  // namespace sandpool::testing
