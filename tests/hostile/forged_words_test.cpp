// A handler that forges the status words its worker writes (issue 12, item 1): it writes 0
// into started_task ("nothing runs") and keeps heartbeat_ms fresh while it burns CPU. The
// manager decides which task runs from its own dispatch order, so the task's timeout,
// cpu_time and a cancel still end it and its worker; nothing is left wedged.
#include <catch2/catch.hpp>

#include <cstddef>
#include <thread>

#include <sandpool/ipc/layout.hpp>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;
using sandpool::hostile::integration_plugin;

namespace {

constexpr std::chrono::seconds kForgePatience{60};  // generous: a loaded 2-core VM

// scribble's "forge" order for `seconds` (see scribble.c).
std::string forge(int seconds) {
  return "forge " + std::to_string(offsetof(ipc::RegionHeader, started_task)) + " " +
         std::to_string(offsetof(ipc::RegionHeader, heartbeat_ms)) + " " + std::to_string(seconds);
}

PoolOptions forging_pool(sandbox::SeccompProfile profile) {
  PoolOptions o = hostile_options(integration_plugin("scribble"));
  o.sandbox.profile = profile;
  return o;
}

}  // namespace

TEST_CASE("a forged idle started_task does not escape the task's timeout or cpu_time") {
  // The forgery runs 30 s: only the manager's own deadline or CPU meter ends it sooner.
  const auto [limit, timeout, cpu_time, outcome] =
      GENERATE(table<std::string, std::chrono::milliseconds, std::chrono::milliseconds, Outcome>(
          {{"timeout", 500ms, 0ms, Outcome::kTimedOut},
           {"cpu_time", 60000ms, 300ms, Outcome::kResourceLimit}}));
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  INFO(limit << ", profile " << sandbox::profile_name(profile));
  HostileWorld world;
  PoolOptions o = forging_pool(profile);
  o.timeout = timeout;
  o.cpu_time = cpu_time;
  world.start(o);
  const TaskResult r = world.attack("scribble", forge(30));
  REQUIRE(r.attempts() == 1);
  INFO(r.history[0].error);
  CHECK(r.history[0].outcome == outcome);
  if (outcome == Outcome::kResourceLimit)
    CHECK(r.history[0].error.find("cpu") != std::string::npos);
  CHECK(r.state == TaskState::kDeadLettered);
  world.close_and_check_clean();
  CHECK(world.final_stats().restarts >= 1);  // its worker was killed and replaced
}

TEST_CASE("a forged idle started_task does not escape a cancel") {
  const auto profile =
      GENERATE(sandbox::SeccompProfile::kStrict, sandbox::SeccompProfile::kRelaxed);
  INFO("profile " << sandbox::profile_name(profile));
  HostileWorld world;
  PoolOptions o = forging_pool(profile);
  o.timeout = 60s;
  o.cancel_grace = 200ms;
  world.start(o);
  auto ticket = world.pool().submit("scribble", forge(30), {});
  REQUIRE(ticket);
  // In its worker's ring (the manager's own count, not the worker's word), then cancelled.
  const auto until = std::chrono::steady_clock::now() + kForgePatience;
  auto in_a_ring = [&] {
    for (const WorkerInfo& w : world.pool().workers()) {
      if (w.in_flight > 0) return true;
    }
    return false;
  };
  while (!in_a_ring() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(in_a_ring());
  REQUIRE(ticket->cancel());
  REQUIRE(ticket->wait_for(kForgePatience));
  const TaskResult r = ticket->wait();
  INFO(r.error);
  CHECK(r.state == TaskState::kCancelled);
  world.require_pools_serve();
  world.close_and_check_clean();
}
