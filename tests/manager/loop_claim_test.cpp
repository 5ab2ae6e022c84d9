// The loop's claim between real threads (LoopClaim), and the core's side of the direct
// hand-off (PoolCore::hand_off) on a hand-driven core: when a submitting thread may dispatch
// a task itself, and when it must leave it to the loop. These run under TSan too (label
// `threaded`).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/loop_claim.hpp"
#include "pool_core_harness.hpp"

namespace sandpool::core {
namespace {

using testing::Harness;

constexpr auto kClaimPatience = std::chrono::seconds(60);

// A task as PoolLoop::admit_task makes it (admitted, not yet taken in).
TaskPtr admitted_task(Harness& h, SubmitOptions so = {}) {
  h.admitted++;
  return TaskRecord::make(h.next_id++, "echo", "p", std::move(so));
}

// Returns true iff `claim` could be taken (and lets go of it again).
bool takes(LoopClaim& claim) {
  if (!claim.try_acquire()) return false;
  claim.release();
  return true;
}

}  // namespace

TEST_CASE("a claim taken is refused to every other taker until it is released") {
  LoopClaim claim;
  claim.acquire();
  CHECK(claim.held());
  std::atomic<bool> other{true};
  std::thread([&] { other.store(takes(claim)); }).join();
  CHECK_FALSE(other.load());
  CHECK(claim.held());
  claim.release();
  CHECK_FALSE(claim.held());
  CHECK(takes(claim));
  std::thread([&] { other.store(takes(claim)); }).join();
  CHECK(other.load());
}

TEST_CASE("acquire sleeps while the claim is held and takes it, with the holder's writes, after") {
  LoopClaim claim;
  int guarded = 0;  // written only under the claim
  claim.acquire();
  std::atomic<bool> waiting{false};
  std::atomic<int> seen{-1};
  std::thread loop([&] {
    waiting.store(true);
    claim.acquire();
    seen.store(guarded);
    claim.release();
  });
  // Let it pass its spin and go to sleep on the word: it marks the claim contended then.
  const auto until = std::chrono::steady_clock::now() + kClaimPatience;
  while (!claim.contended() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  CHECK(claim.contended());
  CHECK(seen.load() == -1);  // still waiting: the claim is ours
  guarded = 42;
  claim.release();  // wakes it
  loop.join();
  CHECK(seen.load() == 42);
  CHECK_FALSE(claim.held());
}

TEST_CASE("takers that try and a taker that waits never hold the claim together") {
  LoopClaim claim;
  long inside = 0;  // written only under the claim; TSan sees any overlap
  std::atomic<long> taken{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> submitters;
  for (int k = 0; k < 3; ++k) {
    submitters.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (!claim.try_acquire()) continue;
        ++inside;
        taken.fetch_add(1, std::memory_order_relaxed);
        claim.release();
      }
    });
  }
  constexpr long kLoopPasses = 20000;
  for (long i = 0; i < kLoopPasses; ++i) {
    claim.acquire();
    ++inside;
    claim.release();
  }
  stop.store(true);
  for (auto& s : submitters) s.join();
  CHECK(inside == kLoopPasses + taken.load());
}

TEST_CASE("the core takes a hand-off only when it would dispatch the task at once") {
  Harness h;
  h.ready_all();
  SECTION("a ready worker has room and nothing waits: dispatched at once") {
    TaskPtr t = admitted_task(h);
    REQUIRE(h.core->hand_off(t, h.now));
    CHECK(t->state.load() == TaskState::kDispatched);
    CHECK(h.holder(t->id) != 0);
    CHECK(h.admitted.load() == 0);  // its admission released, as the loop's dispatch does
  }
  SECTION("tasks already wait in the queue: the loop keeps their order") {
    for (int i = 0; i < 4; ++i) h.submit();  // 2 workers x concurrency 2: full
    h.submit();                              // queued
    TaskPtr t = admitted_task(h);
    CHECK_FALSE(h.core->hand_off(t, h.now));
    CHECK(t->state.load() == TaskState::kQueued);
    CHECK(h.holder(t->id) == 0);
  }
  SECTION("every ready worker is full: left to the loop") {
    for (int i = 0; i < 4; ++i) h.submit();
    CHECK_FALSE(h.core->hand_off(admitted_task(h), h.now));
  }
  SECTION("a scheduled task is left to the loop") {
    SubmitOptions so;
    so.delay = std::chrono::milliseconds(50);
    CHECK_FALSE(h.core->hand_off(admitted_task(h, so), h.now));
  }
  SECTION("a closing pool is left to the loop") {
    h.core->close(h.now);
    CHECK_FALSE(h.core->hand_off(admitted_task(h), h.now));
  }
}

TEST_CASE("a pool with rate limits, a dispatch function, autoscaling or affinity keys falls back") {
  PoolOptions o = Harness::defaults();
  SECTION("a rate limit") { o.flow.pool.tasks = 100; }
  SECTION("a dispatch function") {
    o.dispatch_function = [](std::span<const WorkerView>, const TaskView&) {
      return std::optional<std::size_t>(0);
    };
  }
  SECTION("autoscaling") {
    o.autoscale.enabled = true;
    o.worker_bounds = {1, 4};
  }
  SECTION("affinity, for a keyed task") { o.dispatch = DispatchStrategy::kAffinity; }
  Harness h(o);
  h.ready_all();
  SubmitOptions so;
  so.key = "k";
  TaskPtr t = admitted_task(h, so);
  CHECK_FALSE(h.core->hand_off(t, h.now));
  CHECK(t->state.load() == TaskState::kQueued);
}

}  // namespace sandpool::core
