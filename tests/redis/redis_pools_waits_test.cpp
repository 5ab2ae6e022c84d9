// poold's waits on Redis pools' tasks (RedisPools::wait, redis_pools_waits.cpp) against a real
// redis-server: a node holds at most RedisPools::kMaxWaits of them (queue_full past that), and a
// new wait never waits for Redis on the caller's thread, even when Redis stalls.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <sandpool/redis/task_producer.hpp>
#include <sandpool/service/redis_pools.hpp>
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::poold::RedisPools;
using sandpool::testing::eventually;
using sandpool::testing::RedisServer;

namespace {

std::unique_ptr<RedisPools> start_pools(const RedisServer& server) {
  RedisPools::Options o;
  o.address = "unix:" + server.socket();
  o.endpoint = server.endpoint();
  o.node = "node-a";
  auto p = RedisPools::start(o);
  REQUIRE(p.is_ok());
  return std::move(p).value();
}

// `n` queued tasks of pool "echo" (no node serves it: they stay queued): their ids.
std::vector<std::uint64_t> queued_tasks(redis::Connection& c, std::size_t n) {
  const redis::TaskProducer producer(redis::PoolKeys("sandpool:", "echo"));
  std::vector<redis::StreamTask> tasks(n);
  for (redis::StreamTask& t : tasks) t.type = "echo";
  auto got = producer.submit_many(c, tasks, 1000);
  REQUIRE(got.is_ok());
  std::vector<std::uint64_t> ids;
  for (const auto& one : *got) {
    REQUIRE(one.is_ok());
    ids.push_back(one->id);
  }
  return ids;
}

bool blpop_blocked(const RedisServer& server) {
  auto c = redis::Connection::open(server.endpoint());
  if (!c) return false;
  auto info = c->command({"INFO", "clients"});
  return info && info->str.find("blocked_clients:1") != std::string::npos;
}

}  // namespace

TEST_CASE("a node holds at most kMaxWaits waits on redis tasks, and refuses more queue_full") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const auto ids = queued_tasks(c, RedisPools::kMaxWaits + 1);
  std::atomic<int> closed{0}, other{0};
  {
    auto pools = start_pools(server);
    const auto deadline = RedisPools::Clock::now() + std::chrono::minutes(10);
    for (std::size_t i = 0; i < RedisPools::kMaxWaits; ++i) {
      pools->wait(ids[i], deadline, [&](const Result<TaskResult>& r) {
        ++(r.status().code() == Code::kClosed ? closed : other);
      });
    }
    CHECK(other.load() == 0);  // each held: its task is queued, its deadline far
    std::optional<Status> refused;
    pools->wait(ids.back(), deadline, [&](const Result<TaskResult>& r) { refused = r.status(); });
    REQUIRE(refused.has_value());  // answered at once, on this thread
    CHECK(refused->code() == Code::kQueueFull);
    CHECK(refused->message().find(std::to_string(RedisPools::kMaxWaits)) != std::string::npos);
  }
  // The node's shutdown answered every wait it held.
  CHECK(closed.load() == static_cast<int>(RedisPools::kMaxWaits));
  CHECK(other.load() == 0);
}

TEST_CASE("a new wait does not wait for a stalled redis on the caller's thread") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  const auto ids = queued_tasks(c, 2);
  auto pools = start_pools(server);
  std::promise<Status> first, second;
  pools->wait(ids[0], RedisPools::Clock::now() + std::chrono::minutes(10),
              [&](const Result<TaskResult>& r) { first.set_value(r.status()); });
  // The waits thread is in its BLPOP: a new wait must end it (a push to its wake list).
  REQUIRE(eventually([&] { return blpop_blocked(server); }));
  server.pause();
  // Redis takes the push into its socket and answers nothing: a push on this thread would
  // hold it until the connection's reply timeout (2 s).
  auto call = std::async(std::launch::async, [&] {
    pools->wait(ids[1], RedisPools::Clock::now() + std::chrono::milliseconds(100),
                [&](const Result<TaskResult>& r) { second.set_value(r.status()); });
  });
  const bool returned = call.wait_for(std::chrono::seconds(1)) == std::future_status::ready;
  server.resume();
  CHECK(returned);
  call.wait();
  // Once Redis is back, the wait answers past its deadline, as its task is (queued).
  auto answered = second.get_future();
  REQUIRE(answered.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  CHECK(answered.get().is_ok());
  pools.reset();
}
