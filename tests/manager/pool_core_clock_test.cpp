// PoolCore reads no clock of its own: decisions run on the `now` its entry points are given,
// and the wall-clock stamps of an attempt (started_ms, ended_ms) come from
// WorkerControl::wall_ms(), which the harness moves by hand like the monotonic clock.
#include <catch2/catch.hpp>

#include <csignal>

#include "core/pool_core.hpp"
#include "pool_core_harness.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::account;
using sandpool::testing::Harness;

TEST_CASE("an attempt's wall-clock stamps are the control's clock at dispatch and at its result") {
  Harness h;
  h.ready_all();
  const std::int64_t at_dispatch = h.ctl.wall_clock_ms;
  auto t = h.submit();
  h.advance(250ms);
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kOk));
  const auto a = account(t);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].started_ms == at_dispatch);
  CHECK(a.history[0].ended_ms == at_dispatch + 250);
}

TEST_CASE("a failed attempt and a crashed one are stamped with the control's clock too") {
  Harness h;
  h.ready_all();
  const std::int64_t start = h.ctl.wall_clock_ms;
  auto t = h.submit();
  h.advance(40ms);
  REQUIRE(h.result(h.holder(t->id), t->id, ipc::TaskStatus::kRetry));
  h.advance(0ms);  // no backoff (retry.base 0): dispatched again at once
  const auto w = h.holder(t->id);
  REQUIRE(w != 0);
  h.advance(60ms);
  h.ctl.workers[w].started = t->id;
  h.exit(w, ExitStatus{false, 0, SIGSEGV});
  const auto a = account(t);
  REQUIRE(a.history.size() == 2);
  CHECK(a.history[0].started_ms == start);
  CHECK(a.history[0].ended_ms == start + 40);
  CHECK(a.history[1].started_ms == start + 40);
  CHECK(a.history[1].ended_ms == start + 100);
}

TEST_CASE("a running task abandoned at shutdown ends its attempt at the control's clock") {
  Harness h;
  h.ready_all();
  const std::int64_t start = h.ctl.wall_clock_ms;
  auto t = h.submit();
  h.advance(500ms);
  REQUIRE(h.core->abandon_all(DeadReason::kShutdown, "shutdown: out of time", h.now) == 1);
  const auto a = account(t);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].outcome == Outcome::kLost);
  CHECK(a.history[0].started_ms == start);
  CHECK(a.history[0].ended_ms == start + 500);
}
