// The direct hand-off (docs/architecture.md, "The loop's claim"): a submit that finds the
// pool's loop idle takes the loop's claim and dispatches the task itself, without waking the
// loop. Real workers (echo, sleep), real threads: submits raced against the loop's own
// passes, a worker's death and the pool's close.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/pool/pool.hpp>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// Waits until the pool's loop thread is parked in its sleep (Pool::busy_for_ns() reads 0
// only then); the test fails if it never is.
void wait_loop_parked(const Pool& pool) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (pool.busy_for_ns() != 0) {
    if (std::chrono::steady_clock::now() >= until) FAIL("the loop never parked");
    std::this_thread::yield();
  }
}

// `threads` threads each run `trips` sequential round trips (submit, wait); returns how many
// ended completed with their payload echoed. A submit the pool refused counts as not.
int race_round_trips(Pool& pool, int threads, int trips) {
  const std::string type = pool.task_types().front();
  std::atomic<int> echoed{0};
  std::vector<std::thread> submitters;
  for (int k = 0; k < threads; ++k) {
    submitters.emplace_back([&, k] {
      for (int i = 0; i < trips; ++i) {
        const std::string payload = "t" + std::to_string(k) + "-" + std::to_string(i);
        auto t = pool.submit(type, payload);
        if (!t || !t->wait_for(kPatience)) continue;
        const TaskResult r = t->wait();
        if (r.state == TaskState::kCompleted && r.result == payload) echoed.fetch_add(1);
      }
    });
  }
  for (auto& s : submitters) s.join();
  return echoed.load();
}

}  // namespace

TEST_CASE("a submit into a pool whose loop sleeps wakes only the worker, not the loop") {
  PoolOptions o = pool_options("sleep", 2);
  o.spin_us = 0;      // neither the loop nor the workers spin: each sleeps at once
  o.concurrency = 1;  // the busy worker's ring is full: the round trips go to the other
  auto pool = make_pool(o);
  // A long task on one worker: the loop parks with its running poll (10 ms), so it looks at
  // the pool soon enough on its own for a task handed to the other worker.
  auto busy = pool->submit("sleep", "60000");
  REQUIRE(busy);
  sandpool::testing::wait_running(*busy);
  REQUIRE(run(*pool, "sleep", "0").state == TaskState::kCompleted);
  constexpr int kTrips = 40;
  const std::uint64_t wakes_before = pool->wake_syscalls();
  for (int i = 0; i < kTrips; ++i) {
    wait_loop_parked(*pool);
    REQUIRE(run(*pool, "sleep", "0").state == TaskState::kCompleted);
  }
  // Through the loop each trip pays two wakes: the loop's bell and the sleeping worker's
  // futex. Handed off, only the worker's (a few submits may still meet a loop that woke on
  // its own meanwhile: its running poll).
  const std::uint64_t wakes = pool->wake_syscalls() - wakes_before;
  CHECK(wakes <= kTrips + kTrips / 4);
  REQUIRE(busy->cancel());
  REQUIRE(busy->wait_for(kPatience));
}

TEST_CASE("a task handed off while the loop sleeps long still times out and shows running") {
  PoolOptions o = pool_options("sleep", 1);
  o.spin_us = 0;
  // An idle loop sleeps a whole heartbeat interval: far past the task's timeout, so the task
  // ends on time only if the hand-off told the loop to look earlier.
  o.heartbeat_interval = 30s;
  auto pool = make_pool(o);
  REQUIRE(run(*pool, "sleep", "1").state == TaskState::kCompleted);
  wait_loop_parked(*pool);
  SubmitOptions so;
  so.timeout = 300ms;
  so.retries = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto t = pool->submit("sleep", "60000", so);
  REQUIRE(t);
  sandpool::testing::wait_running(*t);
  REQUIRE(t->wait_for(kPatience));
  const TaskResult r = t->wait();
  REQUIRE(r.state == TaskState::kDeadLettered);
  REQUIRE(r.history.size() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  // Well before the loop's own next look (30 s): the hand-off woke it for the deadline.
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);
}

TEST_CASE("submits from many threads raced against the loop's passes each run once") {
  PoolOptions o = pool_options("echo", 2);
  const std::uint32_t spin = GENERATE(0u, 50u);
  o.spin_us = spin;
  auto pool = make_pool(o);
  constexpr int kThreads = 4, kTrips = 300;
  CHECK(race_round_trips(*pool, kThreads, kTrips) == kThreads * kTrips);
  REQUIRE(pool->wait_idle_for(kPatience));
  const PoolStats s = pool->stats();
  CHECK(s.completed == static_cast<std::uint64_t>(kThreads * kTrips));
  CHECK(s.queued == 0);
}

TEST_CASE("tasks handed off to workers that are killed meanwhile are retried, none lost") {
  PoolOptions o = pool_options("echo", 2);
  o.spin_us = 0;
  o.retries = 20;
  auto pool = make_pool(o);
  sandpool::testing::WorkerKiller killer(*pool, 12);
  constexpr int kThreads = 3, kTrips = 200;
  const int echoed = race_round_trips(*pool, kThreads, kTrips);
  CHECK(killer.stop() > 0);
  CHECK(echoed == kThreads * kTrips);
}

TEST_CASE("a pool closed while threads hand off tasks ends every task it accepted") {
  PoolOptions o = pool_options("echo", 2);
  o.spin_us = GENERATE(0u, 50u);
  auto pool = make_pool(o);
  const std::string type = pool->task_types().front();
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<Ticket>> tickets(4);
  std::vector<std::thread> submitters;
  for (int k = 0; k < 4; ++k) {
    submitters.emplace_back([&, k] {
      while (!stop.load()) {
        auto t = pool->submit(type, "x");
        if (!t) {
          CHECK(t.status().code() == Code::kClosed);
          return;
        }
        tickets[static_cast<std::size_t>(k)].push_back(*t);
        accepted.fetch_add(1);
      }
    });
  }
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (accepted.load() < 400 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  pool->close();  // while the submitters still submit
  stop.store(true);
  for (auto& s : submitters) s.join();
  REQUIRE(accepted.load() >= 400);
  REQUIRE_FALSE(pool->submit(type, "late"));
  for (const auto& list : tickets) {
    for (const Ticket& t : list) {
      REQUIRE(t.wait_for(kPatience));
      CHECK(is_terminal(t.state()));
    }
  }
}
