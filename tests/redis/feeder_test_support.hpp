// Helpers of the RedisFeeder tests: the test's redis-server and pool, a node's options on it,
// a started feeder, and a pool whose workers the test stops and continues.
#pragma once

#include <signal.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <sandpool/pool/pool.hpp>

#include <sandpool/redis/redis_feeder.hpp>
#include "redis_server.hpp"
#include "redis_test_support.hpp"
#include "test_support.hpp"

namespace sandpool::testing {

// The test's redis-server, a connection to it, and the keys of pool "work" (prefix "sp:").
struct FeederWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  const PoolSides stream{"sp:", "work"};
};

// Node `name` of pool "work" (prefix "sp:"), holding `capacity` tasks, beating every 100 ms
// and claiming entries idle for 1 s.
inline redis::FeederOptions node(const RedisServer& server, const std::string& name,
                                 std::size_t capacity) {
  redis::FeederOptions o;
  o.endpoint = server.endpoint();
  o.prefix = "sp:";
  o.pool = "work";
  o.consumer = name;
  o.capacity = capacity;
  o.heartbeat = std::chrono::milliseconds(100);
  o.claim_after = std::chrono::milliseconds(1000);
  return o;
}

inline std::unique_ptr<redis::RedisFeeder> start_node(Pool& pool, redis::FeederOptions o) {
  auto f = redis::RedisFeeder::start(pool, std::move(o));
  if (!f) FAIL("RedisFeeder::start: " << f.status().to_string());
  return std::move(f).value();
}

// A pool of `workers` workers of `plugin` whose workers the test stops and continues: a
// stopped worker ends nothing, and is not replaced for its missing beats meanwhile.
inline PoolOptions stoppable_pool(const std::string& plugin, std::uint32_t workers) {
  PoolOptions o = pool_options(plugin, workers);
  o.missed_heartbeats = 100000;
  return o;
}

// Sends `sig` (SIGSTOP, SIGCONT) to each of the pool's `n` workers, once all have started.
inline void signal_workers(Pool& pool, std::size_t n, int sig) {
  std::vector<WorkerInfo> workers;
  REQUIRE(eventually([&] {
    workers = pool.workers();
    if (workers.size() != n) return false;
    for (const WorkerInfo& w : workers) {
      if (w.pid <= 0 || (w.state != "idle" && w.state != "busy")) return false;
    }
    return true;
  }));
  // Once kill() returns the signal is pending: the worker runs no more of its own code.
  for (const WorkerInfo& w : workers) REQUIRE(::kill(w.pid, sig) == 0);
}

}  // namespace sandpool::testing
