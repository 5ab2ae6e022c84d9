// Hostile plugins against poold itself (a real poold, its socket and the real Client): a
// plugin that declares another pool's task type to receive its payloads, and a worker that
// floods its submitter with forged progress frames
// (tests/hostile/plugins/hostile_protocol.c).
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <mutex>
#include <set>

#include <sandpool/ipc/messages.hpp>
#include "wire_json.hpp"

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
  auto report = as_json(c.reload());
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
  auto status = as_json(c.status());
  REQUIRE(status);
  CHECK((*status)["pools"].size() == 1);
}

TEST_CASE("a worker's flood of progress frames is coalesced and its submitter stays connected") {
  const std::string profile = GENERATE("strict", "relaxed");
  INFO("profile " << profile);
  PooldFixture f("pools:\n" + hostile_pool_yaml("flood", "{}", profile));

  // Who ended: from a second connection, so the test knows the flood is over while the
  // submitter's connection is not being read.
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::uint64_t> ended;
  Client watch = f.connect();
  REQUIRE(raw_start(
      watch, "events", {{"follow", true}}, {},
      [&](const Reply& e) {
        if (e.body.value("event", "") != "task_ended") return;
        std::lock_guard<std::mutex> lock(mu);
        ended.insert(e.body["task_id"].get<std::uint64_t>());
        cv.notify_all();
      },
      [](Result<Reply>) {}));

  // 1,000 frames of 32 KiB: twice the submitter's 16 MiB output limit if each became an
  // event. The submitter does not read while the flood lasts: its reader thread waits in
  // the first progress callback until the task has ended.
  ipc::ProgressMsg progress;
  progress.data = std::string(32 * 1024, 'p');
  std::string frame;
  ipc::encode(progress, &frame);
  const std::string order = forge_order(ipc::MsgKind::kProgress, 1000, true, "exit", frame);
  std::promise<std::uint64_t> first;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<Result<TaskReply>> done;
  std::atomic<int> seen{0};
  std::atomic<int> whole{0};  // events that carried a whole frame's data (no assertion here:
                              // this runs on the client's reader thread)
  Client c = f.connect();
  REQUIRE(c.submit_async(
      task("forge", order), [&](Result<TaskReply> r) { done.set_value(std::move(r)); },
      [&](std::uint64_t id, const std::string& data) {
        whole += data.size() == 32 * 1024;
        if (seen++ == 0) {
          first.set_value(id);
          released.wait();
        }
      }));
  auto first_future = first.get_future();
  REQUIRE(first_future.wait_for(kPatience) == std::future_status::ready);
  const std::uint64_t id = first_future.get();
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, kPatience, [&] { return ended.count(id) != 0; }));
  }
  release.set_value();
  auto done_future = done.get_future();
  REQUIRE(done_future.wait_for(kPatience) == std::future_status::ready);
  Result<TaskReply> r = done_future.get();
  INFO(r.status().to_string());
  REQUIRE(r);  // the connection was not dropped: the final account arrived
  CHECK(r->id == id);
  CHECK(r->state == "dead_lettered");  // the worker exited after the flood: lost, no retries
  CHECK(account_json(*r)["history"][0]["outcome"] == "lost");
  UNSCOPED_INFO("progress events that reached the submitter: " << seen.load());
  // The flood reached the submitter coalesced: far fewer events than frames.
  CHECK(seen.load() < 500);
  CHECK(whole.load() == seen.load());
  REQUIRE(as_json(c.status()));
}
