// A local pool switched to `backend: redis` at a restart of poold (docs/journal.md, "Every
// path that moves a task"): the unfinished tasks its journal holds go to the pool's Redis
// stream, each once, and run there; the journal ends them, naming the cluster task.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <sandpool/redis/task_producer.hpp>

#include "poold_process.hpp"
#include "redis_server.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

// One `sleep` pool of `workers` workers, one task each at a time.
std::string sleep_pool(const std::string& backend, int workers) {
  const std::string n = std::to_string(workers);
  return "pools:\n" + pool_yaml("sleep", "sleep",
                                backend +
                                    "    concurrency: 1\n"
                                    "    task_defaults: {timeout: 1m, retries: 3}\n",
                                "{min: " + n + ", max: " + n + ", initial: " + n + "}");
}

// Three tasks submitted to the local pool (one runs an hour, two wait behind it), then poold
// killed with SIGKILL: all three stay open in the journal. Returns their ids.
std::vector<std::uint64_t> three_open_tasks_then_kill(PooldFixture& f) {
  Client c = f.connect();
  std::vector<std::uint64_t> ids;
  for (const char* ms : {"60000", "100", "100"}) {
    auto s = c.submit(task("sleep", ms));
    REQUIRE(s);
    ids.push_back(s->id);
  }
  REQUIRE(wait_task_state(c, ids[0], "running"));
  f.poold->signal(SIGKILL);
  REQUIRE(f.poold->wait_exit() == 128 + SIGKILL);
  return ids;
}

// The cluster's id counter: every task submitted to Redis takes the next id.
std::string id_counter(const RedisServer& server) {
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c);
  auto v = c->command({"GET", "sandpool:ids"});
  REQUIRE(v);
  return v->str;
}

TEST_CASE(
    "poold: a local pool turned into a Redis pool at a restart hands its tasks to the stream "
    "once") {
  RedisServer redis;
  const std::string redis_service =
      "  redis: {address: \"unix:" + redis.socket() + "\", heartbeat: 200ms}\n";
  PooldFixture f(sleep_pool("", 1), "  shutdown_timeout: 0s\n" + redis_service);
  const std::vector<std::uint64_t> ids = three_open_tasks_then_kill(f);

  write_file(f.config, service_yaml(f.dir.path, "  shutdown_timeout: 0s\n" + redis_service) +
                           sleep_pool("    backend: redis\n", 2));
  f.start();
  CHECK(f.poold->wait_for_output("handed 3 unfinished journaled tasks to its stream"));
  Client again = f.connect();
  std::vector<std::uint64_t> cluster_ids;
  for (const std::uint64_t id : ids) {
    auto t = again.task(id);
    REQUIRE(t);
    INFO("task " << id << ": " << t->error);
    CHECK(t->state == "cancelled");
    const auto at = t->error.find(" as task ");
    REQUIRE(at != std::string::npos);
    cluster_ids.push_back(std::stoull(t->error.substr(at + 9)));
  }
  // The short ones run from Redis beside the long one.
  for (std::size_t i = 1; i < cluster_ids.size(); ++i) {
    auto done = again.wait(cluster_ids[i]);
    REQUIRE(done);
    CHECK(done->state == "completed");
  }
  const std::string ids_taken = id_counter(redis);
  CHECK_FALSE(ids_taken.empty());

  // A restart hands nothing twice: the journal ended them.
  f.poold->signal(SIGTERM);
  REQUIRE(f.poold->wait_exit() == 0);
  f.start();
  CHECK(f.poold->output().find("handed") == std::string::npos);
  CHECK(id_counter(redis) == ids_taken);
  Client third = f.connect();
  auto t = third.task(ids[1]);
  REQUIRE(t);
  CHECK(t->state == "cancelled");
}

TEST_CASE(
    "poold: a journaled task whose hand-over Redis has already (an earlier start's) is counted "
    "as already there, not handed again") {
  RedisServer redis;
  const std::string redis_service =
      "  redis: {address: \"unix:" + redis.socket() + "\", heartbeat: 200ms}\n";
  PooldFixture f(sleep_pool("", 1), "  shutdown_timeout: 0s\n" + redis_service);
  const std::vector<std::uint64_t> ids = three_open_tasks_then_kill(f);
  // As if an earlier start had handed task ids[1] over and died before its journal said so:
  // Redis holds it under the hand-over's idempotency key.
  auto rc = redis::Connection::open(redis.endpoint());
  REQUIRE(rc);
  redis::StreamTask earlier;
  earlier.type = "sleep";
  earlier.payload = "100";
  earlier.options.idempotency_key = "sandpool-journal-" + std::to_string(ids[1]);
  const redis::TaskProducer producer(redis::PoolKeys("sandpool:", "sleep"));
  auto first = producer.submit(*rc, earlier, 1);
  REQUIRE(first);

  write_file(f.config, service_yaml(f.dir.path, "  shutdown_timeout: 0s\n" + redis_service) +
                           sleep_pool("    backend: redis\n", 2));
  f.start();
  CHECK(f.poold->wait_for_output(
      "handed 2 unfinished journaled tasks to its stream, 1 there already (an earlier start's "
      "hand-over), 0 kept in the journal"));
  CHECK(f.poold->output().find("task " + std::to_string(ids[1]) +
                               " of pool sleep: in its Redis "
                               "stream already as task " +
                               std::to_string(first->id)) != std::string::npos);
  Client again = f.connect();
  auto t = again.task(ids[1]);
  REQUIRE(t);
  CHECK(t->state == "cancelled");
  CHECK(t->error.find("as task " + std::to_string(first->id) + " by an earlier start") !=
        std::string::npos);
}

}  // namespace
}  // namespace sandpool::testing
