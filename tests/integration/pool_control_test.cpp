// The operator's controls on a live pool with real workers: drain and resume, restart,
// kill a worker on purpose, and a shutdown that runs out of time.
#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <future>
#include <mutex>
#include <set>

#include <sandpool/pool/pool.hpp>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::holding_pool_options;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::wait_running;

namespace {

std::set<std::int32_t> live_pids(Pool& pool) {
  std::set<std::int32_t> pids;
  for (const WorkerInfo& w : pool.workers()) {
    if (w.state == "idle" || w.state == "busy") pids.insert(w.pid);
  }
  return pids;
}

// Waits until `n` workers serve and none of them is in `old`.
bool wait_replaced(Pool& pool, const std::set<std::int32_t>& old, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < until) {
    auto now = live_pids(pool);
    bool fresh = now.size() == n;
    for (auto pid : now) fresh = fresh && old.count(pid) == 0;
    if (fresh) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

}  // namespace

TEST_CASE("a drained pool refuses new tasks, finishes the accepted ones, and resumes") {
  auto pool = make_pool(pool_options("sleep", 1));
  auto running = pool->submit("sleep", "200");
  REQUIRE(running);
  pool->drain();
  CHECK(pool->stats().state == "draining");
  auto refused = pool->submit("sleep", "1");
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kClosed);
  CHECK(refused.status().message().find("draining") != std::string::npos);
  CHECK(running->wait().state == TaskState::kCompleted);
  pool->resume();
  CHECK(pool->stats().state == "running");
  CHECK(run(*pool, "sleep", "1").state == TaskState::kCompleted);
}

TEST_CASE("kill-worker SIGKILLs a worker: it is replaced and its task completes on retry") {
  // The first attempt runs until its worker dies: the kill finds it running, however slow.
  auto pool = make_pool(holding_pool_options(1));
  auto t = pool->submit("configurable", "hold");
  REQUIRE(t);
  wait_running(*t);
  const auto before = live_pids(*pool);
  REQUIRE(before.size() == 1);
  REQUIRE(pool->kill_worker(*before.begin(), SIGKILL));
  auto r = t->wait();
  CHECK(r.state == TaskState::kCompleted);
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("SIGKILL") != std::string::npos);
  CHECK(wait_replaced(*pool, before, 1));
  auto nobody = pool->kill_worker(999999, SIGKILL);
  REQUIRE_FALSE(nobody);
  CHECK(nobody.code() == Code::kNotFound);
}

TEST_CASE("a rolling restart replaces every worker while tasks keep completing") {
  auto pool = make_pool(pool_options("echo", 2));
  REQUIRE(wait_replaced(*pool, {}, 2));
  const auto before = live_pids(*pool);
  std::vector<Ticket> tickets;
  pool->restart(true);
  for (int i = 0; i < 200; ++i) {
    auto t = pool->submit("echo", "x");
    REQUIRE(t);
    tickets.push_back(std::move(t).value());
  }
  CHECK(wait_replaced(*pool, before, 2));
  for (const auto& t : tickets) CHECK(t.wait().state == TaskState::kCompleted);
  CHECK(pool->stats().restarts == 0);
}

TEST_CASE("a shutdown that runs out of time dead-letters what is left with reason shutdown") {
  PoolOptions o = pool_options("sleep", 1);
  std::mutex mu;
  std::vector<std::string> events;
  o.on_event = [&](const PoolEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(std::string(to_string(e.kind)));
  };
  auto pool = make_pool(o);
  auto quick = pool->submit("sleep", "1");
  auto slow = pool->submit("sleep", "60000");
  auto queued = pool->submit("sleep", "60000");
  REQUIRE(quick);
  REQUIRE(slow);
  REQUIRE(queued);
  wait_running(*slow);
  CHECK(pool->shutdown(200ms) == 2);
  CHECK(quick->wait().state == TaskState::kCompleted);
  for (const Ticket* t : {&*slow, &*queued}) {
    auto r = t->wait();
    CHECK(r.state == TaskState::kDeadLettered);
    CHECK(r.reason == DeadReason::kShutdown);
    CHECK(r.error.find("shutdown") != std::string::npos);
  }
  CHECK(slow->snapshot().attempts() == 1);
  CHECK(queued->snapshot().attempts() == 0);
  CHECK_FALSE(pool->submit("sleep", "1"));
  std::lock_guard lock(mu);
  CHECK(std::count(events.begin(), events.end(), "task_ended") == 3);
}

TEST_CASE("stats_snapshot answers while the loop thread is held, and is exact once idle") {
  // on_event runs on the loop thread: holding it there holds the loop, as a long batch
  // would. stats() would wait for the loop; stats_snapshot() must not.
  PoolOptions o = pool_options("sleep", 1);
  std::promise<void> held, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> hold{true};
  o.on_event = [&](const PoolEvent& e) {
    if (e.kind != PoolEvent::Kind::kTaskEnded || !hold.exchange(false)) return;
    held.set_value();
    released.wait();
  };
  auto pool = make_pool(o);
  // A task long enough that the loop idles while it runs: an idle pass publishes the stats
  // (published stats may lag a busy loop by a pass: a 1-ms task ended in the pass after its
  // submit's, before any publish, on a loaded host, and the snapshot said submitted 0).
  auto t = pool->submit("sleep", "300");
  REQUIRE(t);
  REQUIRE(held.get_future().wait_for(kPatience) == std::future_status::ready);
  auto snapshot = std::async(std::launch::async, [&] { return pool->stats_snapshot(); });
  const bool answered = snapshot.wait_for(kPatience) == std::future_status::ready;
  release.set_value();
  REQUIRE(answered);
  const PoolStats during = snapshot.get();
  CHECK(during.state == "running");
  CHECK(during.workers == 1);
  CHECK(during.submitted == 1);

  CHECK(t->wait().state == TaskState::kCompleted);
  pool->wait_idle();
  const PoolStats exact = pool->stats();
  const PoolStats published = pool->stats_snapshot();
  CHECK(published.completed == 1);
  CHECK(published.completed == exact.completed);
  CHECK(published.queued == exact.queued);
  CHECK(published.in_flight == exact.in_flight);
  // Read-your-writes: a command the caller made is in the next snapshot.
  REQUIRE(pool->scale(2));
  CHECK(pool->stats_snapshot().target_workers == 2);
  pool->drain();
  CHECK(pool->stats_snapshot().state == "draining");
}
