// Supervision with real processes: heartbeats, per-task CPU, recycling, queue TTL and the
// crash loop.
#include <catch2/catch.hpp>

#include <signal.h>

#include <set>
#include <thread>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::wait_running;

namespace {

// Polls cond every few ms until it holds or kPatience passes; returns whether it held.
template <typename Cond>
bool eventually(Cond&& cond) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

}  // namespace

TEST_CASE("a SIGSTOP'd idle worker misses its heartbeats and is replaced") {
  PoolOptions o = pool_options("echo", 1);
  o.heartbeat_interval = 50ms;
  o.missed_heartbeats = 3;
  auto pool = make_pool(o);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  REQUIRE(eventually([&] { return pool->stats().heartbeat_kills == 1; }));
  REQUIRE(eventually([&] {
    auto ws = pool->workers();
    return ws.size() == 1 && ws[0].pid != pid && ws[0].state == "idle";
  }));
  CHECK(run(*pool, "echo", "still here").result == "still here");
}

TEST_CASE("a task over its CPU budget ends as resource_limit: cpu") {
  PoolOptions o = pool_options("cpu", 1);
  o.cpu_time = 200ms;
  o.retries = 0;
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "60000");
  CHECK(r.state == TaskState::kDeadLettered);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.history[0].error.find("resource_limit: cpu") == 0);
}

TEST_CASE("workers are recycled after max_tasks without failing a task") {
  PoolOptions o = pool_options("echo", 1);
  o.recycle_max_tasks = 10;
  auto pool = make_pool(o);
  std::vector<Ticket> ts;
  for (int i = 0; i < 55; ++i) ts.push_back(*pool->submit("echo", std::to_string(i)));
  pool->wait_idle();
  std::set<std::int32_t> pids;
  for (auto& t : ts) {
    auto r = t.wait();
    REQUIRE(r.state == TaskState::kCompleted);
    CHECK(r.attempts() == 1);
    pids.insert(r.history[0].worker_pid);
  }
  CHECK(pids.size() >= 6);
  CHECK(pool->stats().recycled >= 5);
  CHECK(pool->stats().restarts == 0);
}

TEST_CASE("a worker above max_rss is recycled without failing a task") {
  PoolOptions o = pool_options("alloc", 1);
  o.recycle_max_rss = 64u << 20;
  o.heartbeat_interval = 50ms;  // the RSS check runs once per interval
  auto pool = make_pool(o);
  const auto first = pool->workers().at(0).pid;
  auto r = run(*pool, pool->task_types().front(), "100");  // keeps 100 MiB
  REQUIRE(r.state == TaskState::kCompleted);
  REQUIRE(eventually([&] {
    auto ws = pool->workers();
    return ws.size() == 1 && ws[0].pid != first;
  }));
  CHECK(pool->stats().recycled == 1);
  CHECK(run(*pool, pool->task_types().front(), "1").state == TaskState::kCompleted);
}

TEST_CASE("a task queued past its TTL is dead-lettered as expired") {
  PoolOptions o = pool_options("sleep", 1);
  o.concurrency = 1;
  auto pool = make_pool(o);
  // The only worker holds a task until the test cancels it: the next one can only wait.
  auto busy = pool->submit("sleep", "600000");
  wait_running(*busy);
  SubmitOptions so;
  so.queue_ttl = 100ms;
  auto r = run(*pool, "sleep", "1", so);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kExpired);
  CHECK(r.attempts() == 0);
  CHECK(pool->stats().expired == 1);
  REQUIRE(busy->cancel());
  CHECK(busy->wait().state == TaskState::kCancelled);
}

TEST_CASE("a pool whose workers keep crashing enters crash_loop, then leaves it") {
  PoolOptions o = pool_options("crash", 1);
  o.max_restarts = 2;
  o.restart_window = 60s;
  o.crash_backoff_base = 10ms;
  o.crash_backoff_max = 50ms;
  o.stable_after = 1h;  // it cannot leave crash_loop before the test has looked
  o.retries = 5;
  auto pool = make_pool(o);
  auto r = run(*pool, pool->task_types().front(), "boom");
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.attempts() == 6);
  CHECK(pool->stats().crash_loop);
  CHECK(pool->stats().state == "crash_loop");
  // Nothing crashes it any more: once a replacement has stayed up stable_after (now short),
  // the pool recovers.
  o.stable_after = 300ms;
  REQUIRE(pool->reconfigure(o));
  REQUIRE(eventually([&] { return !pool->stats().crash_loop; }));
  CHECK(pool->stats().state == "running");
}
