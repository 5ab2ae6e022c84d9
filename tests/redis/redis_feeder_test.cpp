// RedisFeeder: nodes (a local Pool each, with real workers) sharing a Redis pool through a
// real redis-server of the test's own.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "redis/redis_feeder.hpp"
#include "redis_server.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using redis::FeederOptions;
using redis::RedisFeeder;
using redis::StreamTask;

namespace {

FeederOptions node(const RedisServer& server, const std::string& name, std::size_t capacity) {
  FeederOptions o;
  o.endpoint = server.endpoint();
  o.prefix = "sp:";
  o.pool = "work";
  o.consumer = name;
  o.capacity = capacity;
  o.heartbeat = std::chrono::milliseconds(100);
  o.claim_after = std::chrono::milliseconds(1000);
  return o;
}

std::unique_ptr<RedisFeeder> start_node(Pool& pool, FeederOptions o) {
  auto f = RedisFeeder::start(pool, std::move(o));
  if (!f) FAIL("RedisFeeder::start: " << f.status().to_string());
  return std::move(f).value();
}

// Waits (kPatience at most) until `done` holds; false when it never did.
template <typename Done>
bool eventually(Done done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // Redis has no event for it
  }
  return true;
}

std::vector<std::uint64_t> submit_all(redis::Connection& c, const redis::TaskStream& s,
                                      const std::string& type,
                                      const std::vector<std::string>& payloads,
                                      std::optional<std::uint32_t> retries = std::nullopt) {
  std::vector<std::uint64_t> ids;
  for (const std::string& p : payloads) {
    StreamTask t;
    t.type = type;
    t.payload = p;
    t.retries = retries;
    auto id = s.submit(c, t, 1);
    REQUIRE(id.is_ok());
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace

TEST_CASE("tasks added to the stream run in the node's pool and end once in Redis") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const redis::TaskStream stream("sp:", "work");
  auto pool = make_pool(pool_options("echo", 2));
  auto feeder = start_node(*pool, node(server, "node-a", 8));
  std::vector<std::string> payloads;
  for (int i = 0; i < 200; ++i) payloads.push_back("p" + std::to_string(i));
  const auto ids = submit_all(c, stream, "echo", payloads);
  // Not a task (no id): discarded, not run, and it does not hold the others up.
  REQUIRE(c.command({"XADD", stream.stream_key(), "*", "type", "echo", "payload", "?"}).is_ok());
  REQUIRE(eventually([&] { return feeder->stats().finished == 200; }));
  REQUIRE(eventually([&] { return feeder->stats().malformed == 1; }));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto t = stream.task(c, ids[i]);
    REQUIRE(t.is_ok());
    CHECK(t->state == "completed");
    CHECK(t->result == payloads[i]);
    CHECK(t->attempts == 1);
  }
  CHECK(c.command({"XLEN", stream.stream_key()})->integer == 0);
  CHECK(c.command({"XPENDING", stream.stream_key(), "sandpool"})->elements[0].integer == 0);
  CHECK(feeder->stats().redis_up);
  CHECK(feeder->stats().held == 0);
}

TEST_CASE("two nodes share the stream, and each task ends once") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const redis::TaskStream stream("sp:", "work");
  auto pool_a = make_pool(pool_options("echo", 1));
  auto pool_b = make_pool(pool_options("echo", 1));
  auto a = start_node(*pool_a, node(server, "node-a", 4));
  auto b = start_node(*pool_b, node(server, "node-b", 4));
  const auto ids = submit_all(c, stream, "echo", std::vector<std::string>(300, "x"));
  REQUIRE(eventually([&] { return a->stats().finished + b->stats().finished == 300; }));
  CHECK(a->stats().finished > 0);
  CHECK(b->stats().finished > 0);
  CHECK(a->stats().fenced + b->stats().fenced == 0);
  for (std::uint64_t id : ids) CHECK(stream.task(c, id)->attempts == 1);
}

TEST_CASE("a dead node's tasks are claimed by a live one, with a lost attempt each") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const redis::TaskStream stream("sp:", "work");
  auto pool_a = make_pool(pool_options("sleep", 2));
  auto a = start_node(*pool_a, node(server, "node-a", 4));
  const auto ids = submit_all(c, stream, "sleep", std::vector<std::string>(3, "300"));
  const auto exhausted = submit_all(c, stream, "sleep", {"300"}, 0u);  // no retry left
  REQUIRE(eventually([&] { return a->stats().held == 4; }));
  a->die();  // as a SIGKILL: its heartbeat stops, its entries stay pending for it

  auto pool_b = make_pool(pool_options("sleep", 2));
  auto b = start_node(*pool_b, node(server, "node-b", 4));
  REQUIRE(eventually([&] { return b->stats().finished == 4; }));
  CHECK(b->stats().claimed == 4);
  for (std::uint64_t id : ids) {
    const auto t = stream.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->node == "node-b");
    REQUIRE(t->history.size() == 2);
    CHECK_THAT(t->history[0],
               Catch::Contains("\"outcome\":\"lost\"") && Catch::Contains("claimed by node-b"));
  }
  const auto dead = stream.task(c, exhausted[0]);
  CHECK(dead->state == "dead_lettered");
  CHECK(dead->reason == "retries_exhausted");
  REQUIRE(stream.dead_letters(c, 10)->size() == 1);
  pool_a->close();
}

TEST_CASE("a node that loses Redis keeps running what it holds and writes the ends once back") {
  RedisServer::Options so;
  so.append_only = true;
  RedisServer server(so);
  const redis::TaskStream stream("sp:", "work");
  std::vector<std::uint64_t> ids;
  {
    auto c = redis::Connection::open(server.endpoint()).value();
    ids = submit_all(c, stream, "sleep", std::vector<std::string>(4, "300"));
  }
  auto pool = make_pool(pool_options("sleep", 2));
  auto feeder = start_node(*pool, node(server, "node-a", 4));
  REQUIRE(eventually([&] { return feeder->stats().held == 4; }));
  server.shutdown();  // clean: the append-only file keeps what was written
  REQUIRE(eventually([&] { return pool->stats().completed == 4; }));  // ran meanwhile
  REQUIRE(eventually([&] { return !feeder->stats().redis_up; }));
  CHECK(feeder->stats().finished == 0);
  server.start();
  REQUIRE(eventually([&] { return feeder->stats().finished == 4; }));
  auto c = redis::Connection::open(server.endpoint()).value();
  for (std::uint64_t id : ids) {
    const auto t = stream.task(c, id);
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
