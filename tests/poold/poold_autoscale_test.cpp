// Autoscaling in a real poold (docs/architecture.md, "The autoscaler"): a pool with
// workers.min 0 starts with no worker, a submit starts one and it retires once idle; a pool
// under a queued load grows. Short durations, waits by polling `workers` with generous
// bounds (kPatience): no sleeps, no timed assertions.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "poold_process.hpp"

namespace sandpool::testing {
namespace {

// Polls `workers` of `pool` until `done` holds (kPatience at most); returns the last reply.
ops::WorkersReply poll_workers_until(Client& c, const std::string& pool,
                                     const std::function<bool(const ops::WorkersReply&)>& done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  ops::WorkersReply last;
  while (std::chrono::steady_clock::now() < until) {
    auto w = c.workers(pool);
    REQUIRE(w);
    last = std::move(w).value();
    if (done(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll's pace, not a wait
  }
  return last;
}

std::uint32_t autoscale_target_of(const ops::WorkersReply& w) {
  return w.pools.empty() ? 0 : w.pools.front().target_workers;
}

}  // namespace

TEST_CASE("poold: a pool with workers.min 0 starts a worker for a task and retires it idle") {
  PooldFixture f("pools:\n" + pool_yaml("nap", "sleep", "    task_types: [sleep]\n",
                                        "{min: 0, max: 2, autoscale: {target_queue_wait: 20ms, "
                                        "cooldown: 50ms, idle_timeout: 300ms}}"));
  Client c = f.connect();
  auto before = c.workers("nap");
  REQUIRE(before);
  CHECK(before->workers.empty());
  REQUIRE(before->pools.size() == 1);
  CHECK(before->pools[0].target_workers == 0);
  CHECK(before->pools[0].min == 0);
  CHECK(before->pools[0].autoscale);

  auto done = c.submit_wait(task("sleep", "1"));
  REQUIRE(done);
  CHECK(done->state == "completed");

  const ops::WorkersReply after = poll_workers_until(c, "nap", [](const ops::WorkersReply& w) {
    return autoscale_target_of(w) == 0 && w.workers.empty();
  });
  CHECK(after.workers.empty());
  REQUIRE(after.pools.size() == 1);
  CHECK(after.pools[0].target_workers == 0);
  CHECK(after.pools[0].reason.find("idle") != std::string::npos);
  CHECK(f.poold->wait_for_output("autoscale down"));  // its log may still be in the pipe
}

TEST_CASE("poold: an autoscaled pool adds workers while tasks wait") {
  PooldFixture f("pools:\n" + pool_yaml("nap", "sleep", "    concurrency: 1\n",
                                        "{min: 1, max: 3, autoscale: {target_queue_wait: 20ms, "
                                        "cooldown: 50ms, idle_timeout: 60s}}"));
  Client c = f.connect();
  for (int i = 0; i < 60; ++i) REQUIRE(c.submit(task("sleep", "50")));  // 3 s for one worker
  const ops::WorkersReply grown = poll_workers_until(
      c, "nap", [](const ops::WorkersReply& w) { return autoscale_target_of(w) == 3; });
  REQUIRE(grown.pools.size() == 1);
  CHECK(grown.pools[0].target_workers == 3);
  CHECK(grown.pools[0].reason.find("queue wait") != std::string::npos);
  // Past max it does not go, and `scale` above it is refused.
  auto refused = c.scale("nap", 4);
  CHECK_FALSE(refused);
}

}  // namespace sandpool::testing
