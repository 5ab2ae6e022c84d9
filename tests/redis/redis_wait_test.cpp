// Waits on Redis pools' tasks through real poold nodes (docs/redis-pools.md, "wait"): a wait
// is registered in the task's hash and woken by the script that writes its end, on whichever
// node; it answers at its timeout as the task is, outlives a Redis restart, and a node's
// shutdown answers it at once.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "poold_process.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

namespace sandpool::testing {
namespace {

using namespace std::chrono_literals;

// A node serving the Redis pool `shared` of `sleep` tasks, up to 4 workers.
struct WaitNode : PooldFixture {
  WaitNode(const RedisServer& redis, const std::string& name)
      : PooldFixture("pools:\n" + pool_yaml("shared", "sleep",
                                            "    backend: redis\n"
                                            "    concurrency: 1\n"
                                            "    task_defaults: {timeout: 1m, retries: 5}\n",
                                            "{min: 4, max: 4, initial: 4}"),
                     "  shutdown_timeout: 0s\n  node: " + name + "\n  redis: {address: \"unix:" +
                         redis.socket() + "\", heartbeat: 200ms}\n") {}
};

// True iff task `id`'s hash holds a registered wait (`await`).
bool wait_registered(const RedisServer& redis, std::uint64_t id) {
  auto c = redis::Connection::open(redis.endpoint());
  if (!c) return false;
  auto r = c->command({"HEXISTS", "sandpool:task:" + std::to_string(id), "await"});
  return r && r->integer == 1;
}

// Waits for task `id` through `node` on a thread of its own: the answer, later.
std::future<Result<TaskReply>> wait_async(WaitNode& node, std::uint64_t id,
                                          std::optional<std::chrono::milliseconds> timeout = {}) {
  return std::async(std::launch::async,
                    [c = node.connect(), id, timeout]() mutable { return c.wait(id, timeout); });
}

TEST_CASE("a wait on a redis pool's task is registered in its hash and answered by its end",
          "[redis][wait]") {
  RedisServer redis;
  WaitNode n0(redis, "n0"), n1(redis, "n1");
  Client c = n0.connect();
  auto s = c.submit(task("sleep", "700"));
  REQUIRE(s);
  // Waited for on the other node than the one submitting: either may run it.
  auto answer = wait_async(n1, s->id);
  CHECK(eventually([&] { return wait_registered(redis, s->id); }, 30s));
  auto t = answer.get();
  REQUIRE(t);
  CHECK(t->state == "completed");
}

TEST_CASE("a wait on a redis pool's task answers the task as it is when its timeout passes",
          "[redis][wait]") {
  RedisServer redis;
  WaitNode n0(redis, "n0");
  Client c = n0.connect();
  auto s = c.submit(task("sleep", "30000"));
  REQUIRE(s);
  auto t = c.wait(s->id, 300ms);
  REQUIRE(t);
  CHECK((t->state == "queued" || t->state == "running"));
}

TEST_CASE("many waits at once on a redis pool's tasks each get their task's end", "[redis][wait]") {
  RedisServer redis;
  WaitNode n0(redis, "n0"), n1(redis, "n1");
  constexpr int kTasks = 60;
  std::vector<std::uint64_t> ids;
  Client c = n0.connect();
  for (int i = 0; i < kTasks; ++i) {
    auto s = c.submit(task("sleep", std::to_string(20 + i % 7 * 10)));
    REQUIRE(s);
    ids.push_back(s->id);
  }
  std::vector<std::future<Result<TaskReply>>> answers;
  for (int i = 0; i < kTasks; ++i) answers.push_back(wait_async(i % 2 ? n0 : n1, ids[i]));
  for (int i = 0; i < kTasks; ++i) {
    auto t = answers[i].get();
    REQUIRE(t);
    CHECK(t->id == ids[i]);
    CHECK(t->state == "completed");
  }
}

TEST_CASE("a wait on a redis pool's task outlives a restart of redis", "[redis][wait]") {
  RedisServer redis({.password = "", .append_only = true});
  WaitNode n0(redis, "n0");
  Client c = n0.connect();
  auto s = c.submit(task("sleep", "1500"));
  REQUIRE(s);
  auto answer = wait_async(n0, s->id);
  REQUIRE(eventually([&] { return wait_registered(redis, s->id); }, 30s));
  redis.kill9();
  redis.start();
  auto t = answer.get();
  REQUIRE(t);
  CHECK(t->state == "completed");
}

TEST_CASE("a node's shutdown answers the waits it holds on redis pools' tasks", "[redis][wait]") {
  RedisServer redis;
  WaitNode n0(redis, "n0");
  Client c = n0.connect();
  auto s = c.submit(task("sleep", "60000"));
  REQUIRE(s);
  auto answer = wait_async(n0, s->id);
  REQUIRE(eventually([&] { return wait_registered(redis, s->id); }, 30s));
  n0.poold->signal(SIGTERM);
  REQUIRE(n0.poold->wait_exit() == 0);
  // Answered (poold is shutting down, or its connection closed), not left hanging.
  CHECK(answer.wait_for(30s) == std::future_status::ready);
}

}  // namespace
}  // namespace sandpool::testing
