// The return half of the direct hand-off (docs/architecture.md, "The loop's claim"): a waiter
// (Ticket::wait, Ticket::wait_for) whose task is in flight on a worker, and who finds the
// pool's loop parked, takes the loop's claim and reads that worker's result itself, ending the
// task on its own thread. Real workers (echo, sleep), real threads: callbacks that keep the
// end on the loop, a worker killed, a timeout, a cancel and a close while tasks are waited,
// and several threads waiting and submitting at once.
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

namespace {

// One round trip: submit, then wait (the waiter's path under test). Returns true iff the task
// completed with its payload echoed.
bool echo_round_trip(Pool& pool, const std::string& payload, SubmitOptions so = {}) {
  auto t = pool.submit(pool.task_types().front(), payload, std::move(so));
  if (!t || !t->wait_for(kPatience)) return false;
  const TaskResult r = t->wait();
  return r.state == TaskState::kCompleted && r.result == payload;
}

}  // namespace

TEST_CASE("a waiter whose task runs on a worker reads the result and ends the task itself") {
  PoolOptions o = pool_options("echo", 2);
  o.spin_us = GENERATE(std::uint32_t{50}, std::uint32_t{0});
  auto pool = make_pool(o);
  // Sequential round trips until some ended on the waiting thread: the first ones may meet a
  // loop that spins (it is asked to park) or a worker slower than the waiter's bounded spin.
  const auto until = std::chrono::steady_clock::now() + kPatience;
  int trips = 0;
  while (pool->direct_ends() == 0 && std::chrono::steady_clock::now() < until) {
    REQUIRE(echo_round_trip(*pool, "p" + std::to_string(trips)));
    ++trips;
  }
  CHECK(pool->direct_ends() > 0);
  // The books are the loop's books: every task counted once, nothing left open.
  REQUIRE(pool->wait_idle_for(kPatience));
  const PoolStats s = pool->stats();
  CHECK(s.completed == static_cast<std::uint64_t>(trips));
  CHECK(s.queued == 0);
}

TEST_CASE("a waited task with a callback, or in a pool with a listener, ends on the loop") {
  PoolOptions o = pool_options("echo", 2);
  const bool listener = GENERATE(false, true);
  std::atomic<int> events{0};
  if (listener) o.on_event = [&](const PoolEvent&) { events.fetch_add(1); };
  auto pool = make_pool(o);
  const std::thread::id waiter = std::this_thread::get_id();
  std::atomic<int> done_here{0}, done_calls{0};
  for (int i = 0; i < 200; ++i) {
    SubmitOptions so;
    if (!listener) {
      so.on_done = [&](const TaskResult&) {
        done_calls.fetch_add(1);
        if (std::this_thread::get_id() == waiter) done_here.fetch_add(1);
      };
    }
    REQUIRE(echo_round_trip(*pool, "c" + std::to_string(i), std::move(so)));
  }
  CHECK(pool->direct_ends() == 0);
  CHECK(done_here.load() == 0);  // never on the waiting thread
  if (listener) {
    CHECK(events.load() > 0);
  } else {
    // on_done runs after done is set: the last call may still be under way when wait returns.
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (done_calls.load() < 200 && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    CHECK(done_calls.load() == 200);
  }
}

TEST_CASE("tasks waited while their workers are killed are retried or end as before") {
  PoolOptions o = pool_options("echo", 2);
  o.retries = 20;
  auto pool = make_pool(o);
  sandpool::testing::WorkerKiller killer(*pool, 12);
  constexpr int kThreads = 2, kTrips = 300;
  std::atomic<int> echoed{0};
  std::vector<std::thread> waiters;
  for (int k = 0; k < kThreads; ++k) {
    waiters.emplace_back([&, k] {
      for (int i = 0; i < kTrips; ++i) {
        if (echo_round_trip(*pool, std::to_string(k) + "-" + std::to_string(i))) {
          echoed.fetch_add(1);
        }
      }
    });
  }
  for (auto& w : waiters) w.join();
  CHECK(killer.stop() > 0);
  CHECK(echoed.load() == kThreads * kTrips);
}

TEST_CASE("a waited task that runs past its timeout is killed on time") {
  PoolOptions o = pool_options("sleep", 1);
  o.heartbeat_interval = 30s;  // the idle loop's own look is far past the task's timeout
  auto pool = make_pool(o);
  REQUIRE(sandpool::testing::run(*pool, "sleep", "1").state == TaskState::kCompleted);
  SubmitOptions so;
  so.timeout = 300ms;
  so.retries = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto t = pool->submit("sleep", "60000", so);
  REQUIRE(t);
  REQUIRE(t->wait_for(kPatience));
  const TaskResult r = t->wait();
  REQUIRE(r.state == TaskState::kDeadLettered);
  REQUIRE(r.history.size() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);
}

TEST_CASE("a waited task can be cancelled, and a pool closed under its waiters ends their tasks") {
  PoolOptions o = pool_options("sleep", 2);
  auto pool = make_pool(o);
  auto cancelled = pool->submit("sleep", "60000");
  REQUIRE(cancelled);
  std::thread canceller([&] {
    sandpool::testing::wait_running(*cancelled);
    CHECK(cancelled->cancel());
  });
  REQUIRE(cancelled->wait_for(kPatience));
  canceller.join();
  CHECK(cancelled->wait().state == TaskState::kCancelled);

  // Short tasks waited by four threads while the pool closes: each wait returns, each task
  // accepted ends (completed, or cancelled by the close).
  std::atomic<bool> closing{false};
  std::atomic<int> ended{0}, accepted{0};
  std::vector<std::thread> waiters;
  for (int k = 0; k < 4; ++k) {
    waiters.emplace_back([&] {
      while (!closing.load()) {
        auto t = pool->submit("sleep", "200us");
        if (!t) return;
        accepted.fetch_add(1);
        if (t->wait_for(kPatience) && is_terminal(t->wait().state)) ended.fetch_add(1);
      }
    });
  }
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (accepted.load() < 200 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  closing.store(true);
  pool->close();
  for (auto& w : waiters) w.join();
  CHECK(ended.load() == accepted.load());
}

TEST_CASE("four threads waiting and submitting race the loop and each other, each task once") {
  PoolOptions o = pool_options("echo", 2);
  o.spin_us = GENERATE(std::uint32_t{50}, std::uint32_t{0});
  auto pool = make_pool(o);
  constexpr int kThreads = 4, kTrips = 300;
  std::atomic<int> echoed{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < kTrips; ++i) {
        if (echo_round_trip(*pool, std::to_string(k) + ":" + std::to_string(i))) {
          echoed.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(echoed.load() == kThreads * kTrips);
  REQUIRE(pool->wait_idle_for(kPatience));
  const PoolStats s = pool->stats();
  CHECK(s.completed == static_cast<std::uint64_t>(kThreads * kTrips));
  CHECK(s.queued == 0);
}

TEST_CASE("an on_done allowed on the waiter's thread runs there, once, and read_here ends it") {
  PoolOptions o = pool_options("echo", 2);
  auto pool = make_pool(o);
  const std::thread::id waiter = std::this_thread::get_id();
  std::atomic<int> done_here{0}, done_calls{0};
  const bool read_here = GENERATE(false, true);  // Ticket::wait, or Ticket::read_here
  const auto until = std::chrono::steady_clock::now() + kPatience;
  int trips = 0;
  while (done_here.load() == 0 && std::chrono::steady_clock::now() < until) {
    SubmitOptions so;
    so.on_done = [&](const TaskResult&) {
      done_calls.fetch_add(1);
      if (std::this_thread::get_id() == waiter) done_here.fetch_add(1);
    };
    so.on_done_on_waiter = true;
    const std::string payload = "w" + std::to_string(trips++);
    auto t = pool->submit(pool->task_types().front(), payload, std::move(so));
    REQUIRE(t);
    if (read_here) {
      // Bounded: a task not ended within it is the loop's, and the wait below sees its end.
      (void)t->read_here(std::chrono::microseconds(2000));
    }
    REQUIRE(t->wait_for(kPatience));
    CHECK(t->wait().result == payload);
  }
  CHECK(done_here.load() > 0);
  CHECK(pool->direct_ends() > 0);
  // Each on_done once, on whichever thread ended its task.
  const auto settled = std::chrono::steady_clock::now() + kPatience;
  while (done_calls.load() < trips && std::chrono::steady_clock::now() < settled) {
    std::this_thread::yield();
  }
  CHECK(done_calls.load() == trips);
  REQUIRE(pool->wait_idle_for(kPatience));
  CHECK(pool->stats().completed == static_cast<std::uint64_t>(trips));
}

TEST_CASE("read_here returns false within its bound for a task that runs longer") {
  auto pool = make_pool(pool_options("sleep", 1));
  auto t = pool->submit("sleep", "60000");  // ms: it ends by the cancel below
  REQUIRE(t);
  CHECK_FALSE(t->read_here(std::chrono::microseconds(500)));
  sandpool::testing::wait_running(*t);
  CHECK(t->cancel());
  REQUIRE(t->wait_for(kPatience));
  CHECK(t->wait().state == TaskState::kCancelled);
}
