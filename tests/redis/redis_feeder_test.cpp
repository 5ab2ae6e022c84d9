// RedisFeeder: nodes (a local Pool each, with real workers) sharing a Redis pool through a
// real redis-server of the test's own.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "feeder_test_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using redis::FeederOptions;
using redis::RedisFeeder;
using redis::StreamTask;

namespace {

std::vector<std::uint64_t> submit_all(redis::Connection& c, const PoolSides& s,
                                      const std::string& type,
                                      const std::vector<std::string>& payloads,
                                      std::optional<std::uint32_t> retries = std::nullopt) {
  std::vector<std::uint64_t> ids;
  for (const std::string& p : payloads) {
    StreamTask t;
    t.type = type;
    t.payload = p;
    t.options.retries = retries;
    auto id = s.producer.submit(c, t, 1);
    REQUIRE(id.is_ok());
    ids.push_back(id->id);
  }
  return ids;
}

}  // namespace

TEST_CASE("a node's threads are named after its pool") {
  RedisServer server;
  auto pool = make_pool(pool_options("echo", 1));
  auto feeder = start_node(*pool, node(server, "node-a", 2));
  const auto names = thread_names();
  for (const char* want : {"sp-rd:work", "sp-wr:work", "sp-beat:work"}) {
    CHECK(std::count(names.begin(), names.end(), want) == 1);
  }
}

TEST_CASE("tasks added to the stream run in the node's pool and end once in Redis") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  auto pool = make_pool(pool_options("echo", 2));
  auto feeder = start_node(*pool, node(server, "node-a", 8));
  std::vector<std::string> payloads;
  for (int i = 0; i < 200; ++i) payloads.push_back("p" + std::to_string(i));
  const auto ids = submit_all(c, stream, "echo", payloads);
  // Not a task (no id): discarded, not run, and it does not hold the others up.
  REQUIRE(
      c.command({"XADD", stream.keys.stream_key(), "*", "type", "echo", "payload", "?"}).is_ok());
  REQUIRE(eventually([&] { return feeder->stats().finished == 200; }));
  REQUIRE(eventually([&] { return feeder->stats().malformed == 1; }));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto t = stream.producer.task(c, ids[i]);
    REQUIRE(t.is_ok());
    CHECK(t->state == "completed");
    CHECK(t->result == payloads[i]);
    CHECK(t->attempts == 1);
  }
  CHECK(c.command({"XLEN", stream.keys.stream_key()})->integer == 0);
  CHECK(c.command({"XPENDING", stream.keys.stream_key(), "sandpool"})->elements[0].integer == 0);
  CHECK(feeder->stats().redis_up);
  CHECK(feeder->stats().held == 0);
}

TEST_CASE("two nodes share the stream, and each task ends once") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  auto pool_a = make_pool(pool_options("echo", 1));
  auto pool_b = make_pool(pool_options("echo", 1));
  auto a = start_node(*pool_a, node(server, "node-a", 4));
  auto b = start_node(*pool_b, node(server, "node-b", 4));
  const auto ids = submit_all(c, stream, "echo", std::vector<std::string>(300, "x"));
  REQUIRE(eventually([&] { return a->stats().finished + b->stats().finished == 300; }));
  CHECK(a->stats().finished > 0);
  CHECK(b->stats().finished > 0);
  CHECK(a->stats().fenced + b->stats().fenced == 0);
  for (std::uint64_t id : ids) CHECK(stream.producer.task(c, id)->attempts == 1);
}

TEST_CASE("a dead node's tasks are claimed by a live one, with a lost attempt each") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  // Node a's workers are stopped: it holds all four, and ends none of them before it dies.
  auto pool_a = make_pool(stoppable_pool("sleep", 2));
  signal_workers(*pool_a, 2, SIGSTOP);
  auto a = start_node(*pool_a, node(server, "node-a", 4));
  const auto ids = submit_all(c, stream, "sleep", std::vector<std::string>(3, "50"));
  const auto exhausted = submit_all(c, stream, "sleep", {"50"}, 0u);  // no retry left
  REQUIRE(eventually([&] { return a->stats().held == 4; }));
  a->die();  // as a SIGKILL: its heartbeat stops, its entries stay pending for it
  CHECK(a->stats().finished == 0);
  signal_workers(*pool_a, 2, SIGCONT);  // what they end now, nobody writes to Redis

  auto pool_b = make_pool(pool_options("sleep", 2));
  auto b = start_node(*pool_b, node(server, "node-b", 4));
  REQUIRE(eventually([&] { return b->stats().finished == 4; }));
  {
    const auto live = b->stats();
    CHECK(live.finished == 4);
    CHECK(live.claimed == 4);
  }
  for (std::uint64_t id : ids) {
    const auto t = stream.producer.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->node == "node-b");
    REQUIRE(t->history.size() == 2);
    CHECK_THAT(t->history[0],
               Catch::Contains("\"outcome\":\"lost\"") && Catch::Contains("claimed by node-b"));
  }
  const auto dead = stream.producer.task(c, exhausted[0]);
  CHECK(dead->state == "dead_lettered");
  CHECK(dead->reason == "retries_exhausted");
  REQUIRE(stream.producer.dead_letters(c, 10)->size() == 1);
  pool_a->close();
}

TEST_CASE("a node that loses Redis keeps running what it holds and writes the ends once back") {
  RedisServer::Options so;
  so.append_only = true;
  RedisServer server(so);
  const PoolSides stream("sp:", "work");
  std::vector<std::uint64_t> ids;
  {
    auto c = redis::Connection::open(server.endpoint()).value();
    ids = submit_all(c, stream, "sleep", std::vector<std::string>(4, "300"));
  }
  // The workers are stopped until Redis is away: every end is written after it came back.
  auto pool = make_pool(stoppable_pool("sleep", 2));
  signal_workers(*pool, 2, SIGSTOP);
  auto feeder = start_node(*pool, node(server, "node-a", 4));
  REQUIRE(eventually([&] { return feeder->stats().held == 4; }));
  server.shutdown();  // clean: the append-only file keeps what was written
  REQUIRE(eventually([&] { return !feeder->stats().redis_up; }));
  signal_workers(*pool, 2, SIGCONT);
  REQUIRE(eventually([&] { return pool->stats().completed == 4; }));  // ran meanwhile
  {
    const auto away = feeder->stats();
    CHECK(away.finished == 0);
    CHECK_FALSE(away.redis_up);
  }
  server.start();
  REQUIRE(eventually([&] { return feeder->stats().finished == 4; }));
  auto c = redis::Connection::open(server.endpoint()).value();
  for (std::uint64_t id : ids) {
    const auto t = stream.producer.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->attempts == 1);
  }
  CHECK(feeder->stats().redis_up);
}

TEST_CASE("a second node under a name in use is refused, and the name is free once its node died") {
  RedisServer server;
  auto pool = make_pool(pool_options("echo", 1));
  auto a = start_node(*pool, node(server, "node-a", 2));
  auto twin = RedisFeeder::start(*pool, node(server, "node-a", 2));
  REQUIRE_FALSE(twin.is_ok());
  CHECK_THAT(twin.status().message(), Catch::Contains("the node name 'node-a' is in use by") &&
                                          Catch::Contains("pid " + std::to_string(::getpid())));
  a->die();  // its key expires within three beats: a node started again under it waits
  auto again = RedisFeeder::start(*pool, node(server, "node-a", 2));
  CHECK(again.is_ok());
}

namespace {

std::vector<std::uint64_t> submit_tenant(redis::Connection& c, const PoolSides& s,
                                         const std::string& tenant, std::size_t n) {
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < n; ++i) {
    StreamTask t;
    t.type = "echo";
    t.payload = tenant + std::to_string(i);
    t.options.tenant = tenant;
    auto id = s.producer.submit(c, t, 1);
    REQUIRE(id.is_ok());
    ids.push_back(id->id);
  }
  return ids;
}

std::size_t count_completed(redis::Connection& c, const PoolSides& s,
                            const std::vector<std::uint64_t>& ids) {
  std::size_t n = 0;
  for (std::uint64_t id : ids) n += s.producer.task(c, id)->state == "completed" ? 1 : 0;
  return n;
}

}  // namespace

// The bounds below are the buckets' own arithmetic (N tasks through a burst of B at R a second
// cannot all start within (N - B) / R seconds), so only a limit applied per node (twice the
// rate over two nodes) breaks them, however slow the machine.
TEST_CASE(
    "two nodes share the pool's rate limit, and what it holds back is neither lost nor an "
    "attempt") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  const auto ids = submit_all(c, stream, "echo", std::vector<std::string>(85, "x"));
  auto pool_a = make_pool(pool_options("echo", 2));
  auto pool_b = make_pool(pool_options("echo", 2));
  FeederOptions oa = node(server, "node-a", 4), ob = node(server, "node-b", 4);
  oa.limits.pool = ob.limits.pool = RateLimit{20, std::chrono::milliseconds(1000), 5};
  const auto began = std::chrono::steady_clock::now();
  auto a = start_node(*pool_a, oa);
  auto b = start_node(*pool_b, ob);
  REQUIRE(eventually([&] { return a->stats().finished + b->stats().finished == 85; }));
  const auto took = std::chrono::steady_clock::now() - began;
  CHECK(took >= std::chrono::milliseconds(3900));  // (85 - 5) / 20 s; per node: about 1.9 s
  CHECK(a->stats().throttle_waits + b->stats().throttle_waits > 0);
  CHECK(a->stats().fenced + b->stats().fenced == 0);
  for (std::uint64_t id : ids) {
    const auto t = stream.producer.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->attempts == 1);
  }
}

TEST_CASE("a tenant over its rate waits in Redis, and holds up no other tenant's tasks") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  // The slow tenant's tasks first in the stream: a node that held them would make the others
  // wait behind them.
  const auto slow = submit_tenant(c, stream, "slow", 17);
  const auto fast = submit_tenant(c, stream, "fast", 40);
  auto pool_a = make_pool(pool_options("echo", 1));
  auto pool_b = make_pool(pool_options("echo", 1));
  FeederOptions oa = node(server, "node-a", 2), ob = node(server, "node-b", 2);
  oa.limits.tenants["slow"] = ob.limits.tenants["slow"] =
      RateLimit{5, std::chrono::milliseconds(1000), 2};
  const auto began = std::chrono::steady_clock::now();
  auto a = start_node(*pool_a, oa);
  auto b = start_node(*pool_b, ob);
  REQUIRE(eventually([&] { return count_completed(c, stream, fast) == fast.size(); }));
  CHECK(count_completed(c, stream, slow) < slow.size());  // (17 - 2) / 5 = 3 s at least
  REQUIRE(eventually([&] { return count_completed(c, stream, slow) == slow.size(); }));
  const auto took = std::chrono::steady_clock::now() - began;
  CHECK(took >= std::chrono::milliseconds(2900));  // per node: about 2 s
  CHECK(a->stats().throttled + b->stats().throttled > 0);
  std::uint64_t throttled = 0;
  for (std::uint64_t id : slow) {
    const auto t = stream.producer.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->attempts == 1);
    throttled += static_cast<std::uint64_t>(
        std::atoll(c.command({"HGET", "sp:task:" + std::to_string(id), "throttled"})->str.c_str()));
  }
  CHECK(throttled == a->stats().throttled + b->stats().throttled);
  for (std::uint64_t id : fast) CHECK(stream.producer.task(c, id)->attempts == 1);
  REQUIRE(eventually([&] { return a->stats().held + b->stats().held == 0; }));
  CHECK(c.command({"ZCARD", "sp:work:later"})->integer == 0);
}

TEST_CASE(
    "a reload's rate limits apply to the next task, and a throttled task is cancelled where it "
    "waits") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  auto pool = make_pool(pool_options("echo", 1));
  auto feeder = start_node(*pool, node(server, "node-a", 2));
  (void)submit_tenant(c, stream, "acme", 2);  // no limits yet
  REQUIRE(eventually([&] { return feeder->stats().finished == 2; }));
  FlowLimits limits;
  limits.tenants["acme"] = RateLimit{1, std::chrono::hours(1), 1};  // one now, then none
  feeder->set_limits(limits);
  const auto next = submit_tenant(c, stream, "acme", 3);
  REQUIRE(eventually([&] { return feeder->stats().finished == 3; }));
  REQUIRE(eventually([&] { return feeder->stats().throttled == 2; }));
  CHECK(c.command({"ZCARD", "sp:work:later"})->integer == 2);
  CHECK(feeder->stats().held == 0);  // they wait in Redis, not here
  for (std::uint64_t id : next) {
    const auto t = stream.producer.task(c, id);
    if (t->state == "completed") continue;
    CHECK(t->state == "queued");
    CHECK(t->attempts == 0);
    CHECK(stream.producer.cancel(c, id, 1)->state == "cancelled");
  }
  CHECK(c.command({"ZCARD", "sp:work:later"})->integer == 0);
}

// The read-ahead (RedisFeeder::kReadAhead): short tasks are read up to twice the node's
// places, so that its workers do not idle through a read's round trip; long ones no further
// than its places, so that a task read here does not wait a long run while another node idles.
TEST_CASE(
    "a node reads ahead twice its places while its tasks are short, and only its places "
    "once they are long") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream("sp:", "work");
  auto pool = make_pool(stoppable_pool("sleep", 1));
  auto feeder = start_node(*pool, node(server, "node-a", 2));
  const auto pending = [&] {
    return c.command({"XPENDING", stream.keys.stream_key(), "sandpool"})->elements.at(0).integer;
  };
  (void)submit_all(c, stream, "sleep", std::vector<std::string>(20, "0"));
  REQUIRE(eventually([&] { return feeder->stats().finished == 20; }));
  signal_workers(*pool, 1, SIGSTOP);  // from now on the node ends nothing: what it reads stays
  (void)submit_all(c, stream, "sleep", std::vector<std::string>(10, "0"));
  REQUIRE(eventually([&] { return feeder->stats().held == 4; }));
  CHECK(pending() == 4);
  signal_workers(*pool, 1, SIGCONT);
  REQUIRE(eventually([&] { return feeder->stats().finished == 30; }));

  // Tasks of 40 ms: once their mean run is over RedisFeeder::kShortRunMs, no read-ahead.
  (void)submit_all(c, stream, "sleep", std::vector<std::string>(10, "40"));
  REQUIRE(eventually([&] { return feeder->stats().finished == 40; }));
  signal_workers(*pool, 1, SIGSTOP);
  (void)submit_all(c, stream, "sleep", std::vector<std::string>(10, "40"));
  REQUIRE(eventually([&] { return feeder->stats().held == 2; }));
  CHECK(pending() == 2);
  CHECK(c.command({"XLEN", stream.keys.stream_key()})->integer == 10);  // 8 wait unread
  signal_workers(*pool, 1, SIGCONT);
  REQUIRE(eventually([&] { return feeder->stats().finished == 50; }));
}
