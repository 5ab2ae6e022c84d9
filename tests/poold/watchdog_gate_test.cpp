// WatchdogGate with BusyClocks on a hand-moved clock: which thread is stuck, when the
// watchdog may be fed, and what /healthz says.
#include <sandpool/service/watchdog_gate.hpp>

#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include <sandpool/base/busy_clock.hpp>

using sandpool::BusyClock;
using sandpool::poold::ThreadBusy;
using sandpool::poold::WatchdogGate;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kS = 1'000'000'000;

// poold's threads, each with its own BusyClock, sampled at the hand-moved time `now`.
struct Threads {
  BusyClock loop, request, jobs, control;
  std::int64_t now = 1000 * kS;

  std::vector<ThreadBusy> sample() const {
    return {{"sp-loop:echo", loop.busy_for_ns(now)},
            {"sp-request", request.busy_for_ns(now)},
            {"sp-jobs", jobs.busy_for_ns(now)},
            {"sp-control", control.busy_for_ns(now)}};
  }
};

}  // namespace

TEST_CASE("the gate's bound is half of WatchdogSec, or 15 s without a watchdog") {
  CHECK(WatchdogGate::for_watchdog(30s).stuck_after() == 15s);
  CHECK(WatchdogGate::for_watchdog(3s).stuck_after() == 1500ms);
  CHECK(WatchdogGate::for_watchdog(0us).stuck_after() == 15s);
}

TEST_CASE("a busy clock reads 0 while idle and the time since begin() while busy") {
  BusyClock c;
  CHECK(c.busy_for_ns(5 * kS) == 0);
  c.begin(5 * kS);
  CHECK(c.busy_for_ns(5 * kS) == 0);
  CHECK(c.busy_for_ns(7 * kS) == 2 * kS);
  c.end();
  CHECK(c.busy_for_ns(100 * kS) == 0);
  // A reading from a clock a moment behind the owner's is not negative.
  c.begin(10 * kS);
  CHECK(c.busy_for_ns(10 * kS - 1) == 0);
}

TEST_CASE("idle threads are healthy however long they sleep") {
  Threads t;
  const WatchdogGate gate = WatchdogGate::for_watchdog(30s);
  t.loop.begin(t.now);
  t.now += 1 * kS;
  t.loop.end();
  t.now += 3600 * kS;  // an hour without a task
  CHECK(gate.may_ping(t.sample()));
  CHECK(gate.stuck(t.sample()) == std::nullopt);
}

TEST_CASE("a thread that keeps taking new items of work is healthy however long it stays busy") {
  Threads t;
  const WatchdogGate gate = WatchdogGate::for_watchdog(30s);
  for (int i = 0; i < 120; ++i) {  // two minutes of back-to-back requests, 1 s each
    t.request.begin(t.now);
    t.now += 1 * kS;
    CHECK(gate.may_ping(t.sample()));
    t.request.end();
  }
}

TEST_CASE("a thread inside one item of work past half of WatchdogSec stops the pings, named") {
  Threads t;
  const WatchdogGate gate = WatchdogGate::for_watchdog(30s);
  t.control.begin(t.now);
  t.loop.begin(t.now);
  t.now += 1 * kS;
  t.control.end();  // the control thread answers and goes back to sleep
  t.now += 14 * kS;
  CHECK(gate.may_ping(t.sample()));  // exactly the bound: not yet
  t.now += 1;
  CHECK_FALSE(gate.may_ping(t.sample()));
  auto stuck = gate.stuck(t.sample());
  REQUIRE(stuck);
  CHECK(stuck->name == "sp-loop:echo");
  CHECK(gate.describe(*stuck) ==
        "thread sp-loop:echo has been inside one item of work for 15.0 s (bound 15.0 s)");

  SECTION("once it finishes that item, the pings resume") {
    t.loop.end();
    CHECK(gate.may_ping(t.sample()));
    t.loop.begin(t.now);  // and a new item starts a new count
    t.now += 2 * kS;
    CHECK(gate.may_ping(t.sample()));
  }
}

TEST_CASE("of several stuck threads, the one stuck longest is named") {
  Threads t;
  const WatchdogGate gate(10s);
  t.jobs.begin(t.now);
  t.now += 5 * kS;
  t.request.begin(t.now);
  t.now += 20 * kS;
  auto stuck = gate.stuck(t.sample());
  REQUIRE(stuck);
  CHECK(stuck->name == "sp-jobs");
  CHECK(stuck->busy_for_ns == 25 * kS);
}
