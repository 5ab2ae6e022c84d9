// RedisFeeder's lone task (redis_feeder_lone.cpp): a task read while the node holds nothing
// else goes to an idle worker from the reader's thread, and the reader writes its end itself.
// Real redis-server, real workers: waited tasks one at a time (W2's shape), workers that die
// on that path, and a node under a backlog, which keeps the batch path.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "feeder_test_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using redis::StreamTask;

namespace {

// Submits one task and waits for its end in Redis (as `poolctl submit --wait` does); returns
// its id.
std::uint64_t submit_and_await(redis::Connection& c, const PoolSides& s, const std::string& type,
                               const std::string& payload,
                               std::optional<std::uint32_t> retries = std::nullopt) {
  StreamTask t;
  t.type = type;
  t.payload = payload;
  t.options.retries = retries;
  auto id = s.producer.submit(c, t, 1);
  REQUIRE(id.is_ok());
  std::optional<std::string> end;
  REQUIRE(eventually([&] {
    auto e = s.producer.await_end(c, id->id, std::chrono::milliseconds(1000));
    REQUIRE(e.is_ok());
    end = *e;
    return end.has_value();
  }));
  return id->id;
}

}  // namespace

TEST_CASE("waited tasks one at a time end through the node's reader, each written once") {
  FeederWorld w;
  auto pool = make_pool(pool_options("echo", 2));
  auto feeder = start_node(*pool, node(w.server, "node-a", 4));
  // Whether a given task takes the lone way is the machine's (a worker's result later than
  // the reader's 500 µs wait, or read first by a loop still spinning, is the batch path's):
  // tasks go one at a time until the reader has written an end itself and the pool has ended
  // one on the reader's thread, at least 60 and at most 10,000 (six TSan builds of this test
  // at once on 2 cores took up to ~2,000). Without the lone way neither ever happens.
  constexpr std::size_t kAtLeast = 60, kAtMost = 10000;
  std::vector<std::uint64_t> ids;
  const auto took_lone_way = [&] {
    return feeder->stats().lone_ends > 0 && pool->direct_ends() > 0;
  };
  while (ids.size() < kAtMost && (ids.size() < kAtLeast || !took_lone_way())) {
    ids.push_back(submit_and_await(w.c, w.stream, "echo", "lone" + std::to_string(ids.size())));
  }
  CHECK(took_lone_way());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto t = w.stream.producer.task(w.c, ids[i]);
    REQUIRE(t.is_ok());
    CHECK(t->state == "completed");
    CHECK(t->result == "lone" + std::to_string(i));
    CHECK(t->attempts == 1);
    CHECK(t->ends == 1);
  }
  const auto s = feeder->stats();
  CHECK(s.finished == ids.size());
  CHECK(s.fenced == 0);
  CHECK(s.lone_ends <= s.finished);
  CHECK(s.held == 0);
}

TEST_CASE("a lone task whose worker dies under it is retried per its retries and ends once") {
  FeederWorld w;
  PoolOptions po = pool_options("chaos", 2);
  po.max_restarts = 1000;  // the deaths are the test's: no crash_loop
  auto pool = make_pool(po);
  redis::FeederOptions o = node(w.server, "node-a", 4);
  o.retry.base = std::chrono::milliseconds(1);  // the next attempt is due at the next beat
  auto feeder = start_node(*pool, o);
  // Each crashes (SIGSEGV) on its first attempt, on the lone task's path, and echoes on its
  // second.
  std::vector<std::uint64_t> crashed;
  for (int i = 0; i < 4; ++i) {
    crashed.push_back(submit_and_await(w.c, w.stream, "chaos", "c1x" + std::to_string(i), 3u));
  }
  // Past its retries: dead-lettered once, with every attempt recorded.
  const std::uint64_t exhausted = submit_and_await(w.c, w.stream, "chaos", "c9x", 1u);
  // Workers SIGKILLed while echo tasks go through one at a time.
  std::vector<std::uint64_t> killed;
  {
    WorkerKiller killer(*pool, 6);
    for (int i = 0; i < 40; ++i) {
      killed.push_back(submit_and_await(w.c, w.stream, "chaos", "ek" + std::to_string(i), 20u));
    }
    killer.stop();
  }
  for (std::size_t i = 0; i < crashed.size(); ++i) {
    const auto t = w.stream.producer.task(w.c, crashed[i]);
    REQUIRE(t.is_ok());
    CHECK(t->state == "completed");
    CHECK(t->result == "c1x" + std::to_string(i));
    CHECK(t->attempts == 2);
    CHECK(t->history.size() == 2);
    CHECK(t->ends == 1);
  }
  const auto dead = w.stream.producer.task(w.c, exhausted);
  REQUIRE(dead.is_ok());
  CHECK(dead->state == "dead_lettered");
  CHECK(dead->reason == "retries_exhausted");
  CHECK(dead->attempts == 2);
  CHECK(dead->ends == 1);
  for (std::size_t i = 0; i < killed.size(); ++i) {
    const auto t = w.stream.producer.task(w.c, killed[i]);
    REQUIRE(t.is_ok());
    CHECK(t->state == "completed");
    CHECK(t->result == "ek" + std::to_string(i));
    CHECK(t->history.size() == t->attempts);
    CHECK(t->ends == 1);
  }
  // How many of these took the lone task's way is the machine's: the way is closed while the
  // tasks' mean run is 0.5 ms or more (a crash's attempt lasts until its worker's death is
  // seen) and a result later than the reader's wait goes to the writer; an ASan build at
  // load took none. The test above shows the way is taken; this one that whichever way a
  // task ends, it ends once.
  // A lone end is any end (FeederStats::lone_ends): here a crashed attempt's is a deferral.
  const auto s = feeder->stats();
  CHECK(s.fenced == 0);
  CHECK(s.lone_ends <= s.finished + s.deferred + s.released);
  CHECK(s.held == 0);
}

TEST_CASE("a node with a backlog reads in batches and ends through its writer") {
  FeederWorld w;
  auto pool = make_pool(pool_options("echo", 2));
  std::vector<StreamTask> tasks(300);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    tasks[i].type = "echo";
    tasks[i].payload = "b" + std::to_string(i);
  }
  REQUIRE(w.stream.producer.submit_many(w.c, tasks, 1).is_ok());
  auto feeder = start_node(*pool, node(w.server, "node-a", 8));
  REQUIRE(eventually([&] { return feeder->stats().finished == 300; }));
  // Never alone while the backlog lasts: at most the last few of the stream were.
  CHECK(feeder->stats().lone_ends < 10);
  CHECK(feeder->stats().fenced == 0);
}
