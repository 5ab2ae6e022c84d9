// poold's control plane against a client that would jam it: a read-only uid holding every
// connection it can, reads during a reload that waits on a new pool, and an admin's submit
// during a flood of reads. A real poold on a scratch config; the read-only peer is really
// uid 65534 (peer_connector.hpp), so these need root: skipped (77) otherwise.
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

#include "peer_connector.hpp"
#include "poold_process.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;

void require_root_to_switch_uid() {
  if (::geteuid() == 0) return;
  std::fprintf(stderr, "skipped: connecting as uid 65534 needs root\n");
  std::exit(77);
}

TEST_CASE("poold: a read-only uid holding every connection it may leaves root's status answered") {
  require_root_to_switch_uid();
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"),
                 "  allow:\n    - {user: 65534, rights: read}\n");
  REQUIRE(::chmod(f.dir.path.c_str(), 0755) == 0);  // uid 65534 reaches the socket
  // 70 connections from uid 65534 (the attack: 64 used to fill the server); they
  // never say hello, and those let in stay open until the end of the test.
  std::vector<UniqueFd> held = connect_as(65534, f.socket, 70);
  Client root = f.connect();
  auto status = as_json(root.status());
  INFO(status.status().to_string());
  REQUIRE(status);
  CHECK((*status)["pools"].size() == 1);
  CHECK(f.poold->wait_for_output("holds too many connections (limit 16 per uid)"));
}

TEST_CASE("poold: reads are answered while a reload waits for a new pool's first worker") {
  // The new pool's plugin hangs in init (hostile.c's init_hang) until init_timeout: the
  // reload holds the job thread for a minute.
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  Client c = f.connect();
  Client watch = f.connect();
  std::promise<void> slow_started;
  std::atomic<bool> seen{false};
  REQUIRE(raw_start(
      watch, "events", {{"follow", true}, {"pool", "slow"}}, {},
      [&](const Reply& e) {
        if (e.body.value("event", "") == "worker_started" && !seen.exchange(true))
          slow_started.set_value();
      },
      [](Result<Reply>) {}));
  write_file(f.config, service_yaml(f.dir.path) + "pools:\n" + pool_yaml("echo", "echo") +
                           "  - name: slow\n    plugin: " + SANDPOOL_HOSTILE_PLUGIN_DIR +
                           "/libhostile.so\n    plugin_config: {init_hang: true}\n"
                           "    health: {init_timeout: 60s}\n");
  std::promise<void> reloaded;
  REQUIRE(
      raw_start(c, "reload", json::object(), {}, {}, [&](Result<Reply>) { reloaded.set_value(); }));
  REQUIRE(slow_started.get_future().wait_for(kPatience) == std::future_status::ready);

  ClientOptions bounded;
  bounded.call_timeout = std::chrono::seconds(30);  // half the reload's wait
  auto reader = Client::connect(f.socket, bounded);
  REQUIRE(reader);
  auto list = raw_body(*reader, "dlq_list", nlohmann::json::object());
  INFO(list.status().to_string());
  REQUIRE(list);
  CHECK((*list)["entries"].empty());
  auto shown = raw_call(*reader, "dlq_show", {{"id", 1}});
  REQUIRE_FALSE(shown);
  CHECK(error_code_of(shown.status()) == "not_found");
  REQUIRE(as_json(reader->stats()));
  REQUIRE(as_json(reader->workers()));
  CHECK(reloaded.get_future().wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
}

TEST_CASE("poold: an admin's submit does not queue behind another client's flood of reads") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));
  // Eight connections of 4,000 reads each (under the 4,096 a connection may have
  // outstanding): enough that a loaded machine cannot answer them all before the submit, as
  // one connection's 4,000 once were.
  constexpr int kConnections = 8, kPerConnection = 4000;
  constexpr int kReads = kConnections * kPerConnection;
  std::atomic<int> answered{0};  // before the clients: their late answers may touch it
  std::promise<void> first;
  std::vector<Client> floods;
  for (int c = 0; c < kConnections; ++c) floods.push_back(f.connect());
  for (int i = 0; i < kPerConnection; ++i) {
    for (Client& flood : floods) {
      REQUIRE(raw_start(flood, "stats", json::object(), {}, {}, [&](Result<Reply>) {
        if (answered.fetch_add(1) == 0) first.set_value();
      }));
    }
  }
  REQUIRE(first.get_future().wait_for(kPatience) == std::future_status::ready);
  Client admin = f.connect();
  auto submitted = admin.submit(task("echo", "not behind the reads"));
  const int reads_before = answered.load();
  REQUIRE(submitted);
  // In arrival order on one thread, the submit would wait for every read sent before it.
  CHECK(reads_before < kReads);
}

}  // namespace
}  // namespace sandpool::testing
