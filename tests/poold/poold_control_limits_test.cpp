// poold's control plane against a client that would jam it: a read-only uid holding every
// connection it can, reads during a reload that waits on a new pool, and an admin's submit
// while a flood of reads is held up. A real poold on a scratch config; the read-only peer is
// really uid 65534 (peer_connector.hpp), so that one needs root: skipped (77) otherwise.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

#include "peer_connector.hpp"
#include "poold_process.hpp"
#include "task_waits.hpp"

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
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("held", "upper"));
  Client admin = f.connect();
  auto workers = as_json(admin.workers("held"));
  REQUIRE(workers);
  const int pid = (*workers)["workers"][0]["pid"];
  // The reads cannot be answered until the test lets them: pool held's loop thread logs its
  // worker's death into a full stderr pipe and stays there, and each read of held's workers
  // waits for that loop, holding up the reads behind it. (Before, the flood was only meant
  // to be too large to answer before the submit; a fast machine answered it all.)
  f.poold->block_output();
  REQUIRE(::kill(pid, SIGKILL) == 0);
  const pid_t loop = f.poold->thread_named("sp-loop:held");
  REQUIRE(loop != 0);
  REQUIRE(poll_until([&] { return f.poold->writing_log(loop); }));

  constexpr int kConnections = 2, kPerConnection = 500;
  constexpr int kReads = kConnections * kPerConnection;
  std::atomic<int> answered{0};  // before the clients: their late answers may touch it
  std::vector<Client> floods;
  for (int c = 0; c < kConnections; ++c) floods.push_back(f.connect());
  for (Client& flood : floods) {
    for (int i = 0; i < kPerConnection; ++i) {
      REQUIRE(raw_start(flood, "workers", {{"pool", "held"}}, {}, {},
                        [&](Result<Reply>) { answered.fetch_add(1); }));
    }
    // The server takes a connection's requests in order and hands `events` to the hub
    // itself: once its backlog is answered, every read before it was handed to the reads
    // thread. (Not `status`: with reads posted to held's loop it waits for that loop too.)
    REQUIRE(raw_call(flood, "events", {{"pool", "echo"}}));
  }
  auto submitted = admin.submit(task("echo", "not behind the reads"));
  REQUIRE(submitted);
  CHECK(answered.load() == 0);  // all still behind the held loop, the submit through

  f.poold->resume_output();
  REQUIRE(poll_until([&] { return answered.load() == kReads; }));
  auto done = admin.wait(submitted->id);
  REQUIRE(done);
  CHECK(done->state == "completed");
}

}  // namespace
}  // namespace sandpool::testing
