// A handler that writes over its worker's shared region, then returns SP_OK (issue 40,
// guarantee 3): it can only fail its own worker's tasks, and never permanently. Either side
// finds the damage: the manager reading a broken result ring, or the worker checking its
// own region after the handler (kExitRegionCorrupt), before it answers or reads another
// task. Either way the scribbler's attempt is a retried protocol_error and the task behind
// it, on the same and only worker, completes. Looped: the scribble races the manager's
// reads and writes of the region, so one run proves little.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#include <sandpool/ipc/layout.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using sandpool::hostile::hostile_options;
using sandpool::hostile::hostile_plugin;
using sandpool::hostile::HostileWorld;
using sandpool::testing::kPatience;

namespace {

constexpr int kIterations = 20;

PoolOptions scribbler_pool(std::uint32_t concurrency) {
  PoolOptions o = hostile_options(hostile_plugin("scribbler"));
  o.task_types.clear();  // the plugin's own
  o.workers = 1;         // the task behind the scribbler must go to the scribbled worker
  o.concurrency = concurrency;
  o.retries = 1;
  o.max_restarts = 1000;  // every iteration costs two workers: no crash_loop back-off
  return o;
}

TaskResult wait(Ticket& t) {
  REQUIRE(t.wait_for(kPatience));
  return t.wait();
}

std::string history(const TaskResult& r) {
  std::string out;
  for (const Attempt& a : r.history) {
    out += " [" + std::string(to_string(a.outcome)) + " pid " + std::to_string(a.worker_pid) +
           ": " + a.error + "]";
  }
  return out;
}

}  // namespace

TEST_CASE("a handler that scribbles on its region fails only its own task, 20 times over") {
  const std::string type = GENERATE("scribble", "scribble_ff");
  // 1: the next task is sent once the scribbler is answered for; 8: it may already wait in
  // the scribbled worker's ring, or have run before the scribbler's retry on the same worker.
  const std::uint32_t concurrency = GENERATE(1u, 8u);
  INFO(type << ", concurrency " << concurrency);
  HostileWorld world;
  world.start(scribbler_pool(concurrency));
  for (int i = 0; i < kIterations; ++i) {
    INFO("iteration " << i);
    auto scribbler = world.pool().submit(type, "", {});
    auto next = world.pool().submit("upper", "ok " + std::to_string(i), {});
    REQUIRE(scribbler);
    REQUIRE(next);
    const TaskResult n = wait(*next);
    INFO("next: " << to_string(n.state) << history(n));
    REQUIRE(n.state == TaskState::kCompleted);
    CHECK(n.result == "OK " + std::to_string(i));
    if (concurrency == 1) {
      CHECK(n.attempts() == 1);  // it never shared a ring with a scribble
    } else {
      // Its result, published but not yet read when the scribbler's retry (behind it in the
      // same worker's ring) wrote over the ring, goes with the ring: one retried attempt.
      CHECK(n.attempts() <= 2);
    }
    for (std::size_t a = 0; a + 1 < n.history.size(); ++a) {
      CHECK(n.history[a].outcome == Outcome::kProtocolError);
    }
    const TaskResult s = wait(*scribbler);
    INFO("scribbler: " << to_string(s.state) << history(s));
    CHECK(s.state == TaskState::kDeadLettered);
    CHECK(s.reason == DeadReason::kRetriesExhausted);  // retried, never permanent
    REQUIRE(s.attempts() == 2);
    for (const Attempt& a : s.history) CHECK(a.outcome == Outcome::kProtocolError);
  }
  CHECK(world.log().count("sandbox_violation") == 0);
  world.require_pools_serve();
  world.close_and_check_clean();
}

TEST_CASE("a scribble only the worker can see is charged to the scribbler by its own check") {
  // Words the manager never reads: only the worker's check after the handler finds them.
  const std::size_t offset =
      GENERATE(offsetof(ipc::RegionHeader, phase), offsetof(ipc::RegionHeader, magic),
               offsetof(ipc::RegionHeader, config_bytes));
  const std::uint32_t concurrency = GENERATE(1u, 8u);
  INFO("offset " << offset << ", concurrency " << concurrency);
  HostileWorld world;
  world.start(scribbler_pool(concurrency));
  for (int i = 0; i < kIterations; ++i) {
    INFO("iteration " << i);
    auto scribbler = world.pool().submit("scribble_at", std::to_string(offset), {});
    auto next = world.pool().submit("upper", "ok", {});
    REQUIRE(scribbler);
    REQUIRE(next);
    const TaskResult n = wait(*next);
    INFO("next: " << to_string(n.state) << history(n));
    CHECK(n.state == TaskState::kCompleted);
    CHECK(n.attempts() == 1);  // the ring was intact: whatever it had answered was read
    const TaskResult s = wait(*scribbler);
    INFO("scribbler: " << to_string(s.state) << history(s));
    CHECK(s.reason == DeadReason::kRetriesExhausted);
    REQUIRE(s.attempts() == 2);
    for (const Attempt& a : s.history) {
      CHECK(a.outcome == Outcome::kProtocolError);
      CHECK(a.error.find("found its shared region scribbled on") != std::string::npos);
    }
  }
  CHECK(world.log().count("exited with code 72") >= 2 * kIterations);
  world.close_and_check_clean();
}
