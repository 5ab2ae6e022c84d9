// WorkerSet (worker_set.hpp) alone: slots, the shrink order, generations and the rolling
// restart, restart intensity with its respawn backoff, init failures; a hand-moved clock.
#include <catch2/catch.hpp>

#include <vector>

#include "core/worker_set.hpp"

using namespace std::chrono_literals;
using sandpool::core::Draining;
using sandpool::core::Ready;
using sandpool::core::Starting;
using sandpool::core::Worker;
using sandpool::core::WorkerId;
using sandpool::core::WorkerSet;
using sandpool::supervision::RestartIntensity;

namespace {

constexpr std::int64_t kSetMs = 1000000;
constexpr std::int64_t kSetT0 = 1'000'000 * kSetMs;

// At most 2 unexpected exits within 1 s; crash backoff 100 ms doubling to 1 s; stable 500 ms.
RestartIntensity::Limits set_limits() {
  RestartIntensity::Limits l;
  l.max_restarts = 2;
  l.window = 1000ms;
  l.backoff_base = 100ms;
  l.backoff_max = 1000ms;
  l.stable_after = 500ms;
  return l;
}

Worker& set_spawn(WorkerSet& s, WorkerId id) {
  Worker w;
  w.id = id;
  w.state = Starting{kSetT0 + 1000 * kSetMs};
  return s.add(std::move(w));
}

void set_ready(WorkerSet& s, WorkerId id, std::int64_t at = kSetT0) {
  Worker* w = s.find(id);
  REQUIRE(w != nullptr);
  w->state = Ready{};
  w->ready_ns = at;
  w->last_work_ns = at;
}

using Step = WorkerSet::RollingStep::Kind;

}  // namespace

TEST_CASE("a new worker takes the lowest slot no live worker holds, and counts its starts") {
  WorkerSet s(3, set_limits());
  CHECK(set_spawn(s, 10).slot == 0);
  CHECK(set_spawn(s, 11).slot == 1);
  CHECK(set_spawn(s, 12).slot == 2);
  CHECK(s.live() == 3);
  CHECK(s.any_starting());
  s.find(11)->state = Draining{};  // no longer live: its slot is free
  const Worker& again = set_spawn(s, 13);
  CHECK(again.slot == 1);
  CHECK(again.slot_restarts == 1);  // the second start in slot 1
  CHECK(s.find(13)->slot_restarts == 1);
  CHECK(s.extract(11).mapped().id == 11);
  CHECK(s.find(11) == nullptr);
  CHECK(s.extract(11).empty());
  CHECK(s.size() == 3);
}

TEST_CASE(
    "a shrink lets a starting worker go first, then the longest idle, then the least "
    "loaded") {
  WorkerSet s(4, set_limits());
  for (WorkerId id = 1; id <= 4; ++id) set_spawn(s, id);
  for (WorkerId id = 1; id <= 3; ++id) set_ready(s, id, kSetT0 + static_cast<std::int64_t>(id));
  s.find(1)->backlog.push_back(nullptr);  // loaded
  CHECK(s.pick_to_shrink()->id == 4);     // still starting
  s.find(4)->state = Draining{};
  CHECK(s.pick_to_shrink()->id == 2);  // idle since before 3
  s.find(2)->state = Draining{};
  CHECK(s.pick_to_shrink()->id == 3);
  s.find(3)->state = Draining{};
  CHECK(s.pick_to_shrink()->id == 1);
  s.find(1)->state = Draining{};
  CHECK(s.pick_to_shrink() == nullptr);
}

TEST_CASE("a new launch spec marks the older ready workers, replaced one at a time") {
  WorkerSet s(3, set_limits());
  for (WorkerId id = 1; id <= 3; ++id) {
    set_spawn(s, id);
    set_ready(s, id);
  }
  CHECK(s.next_replacement().kind == Step::kWait);  // no restart under way
  CHECK(s.new_generation() == 3);
  CHECK(s.rolling_restart());
  CHECK(s.stale(*s.find(1)));
  std::vector<WorkerId> replaced;
  for (int round = 0; round < 3; ++round) {
    const WorkerSet::RollingStep step = s.next_replacement();
    REQUIRE(step.kind == Step::kReplace);
    replaced.push_back(step.worker->id);
    step.worker->state = Draining{};
    const WorkerId next = 10 + static_cast<WorkerId>(round);
    set_spawn(s, next);
    CHECK_FALSE(s.stale(*s.find(next)));
    CHECK(s.next_replacement().kind == Step::kWait);  // its replacement is starting
    set_ready(s, next);
  }
  CHECK(replaced == std::vector<WorkerId>{1, 2, 3});
  CHECK(s.next_replacement().kind == Step::kFinished);
  CHECK_FALSE(s.rolling_restart());
  for (const auto& [id, w] : s) CHECK((id < 10 || !s.stale(w)));
  // Another change: only ready workers are marked; a starting one is of the new spec already
  // when it becomes ready, or stale and marked then (PoolCore::on_ready).
  set_spawn(s, 20);
  CHECK(s.new_generation() == 3);
  CHECK(s.stale(*s.find(20)));
  CHECK(s.rolling_restart());
}

TEST_CASE("a rolling restart pauses while an init-failure backoff holds the respawn") {
  WorkerSet s(2, set_limits());
  for (WorkerId id = 1; id <= 2; ++id) {
    set_spawn(s, id);
    set_ready(s, id);
  }
  s.mark_all_for_replacement();
  s.set_rolling_restart(true);
  CHECK(s.note_init_failure() == 1);
  s.back_off_init_failure(kSetT0);
  CHECK(s.respawn_due_ns() == kSetT0 + 100 * kSetMs);
  CHECK(s.next_replacement().kind == Step::kWait);
  CHECK_FALSE(s.take_due_respawn(kSetT0 + 99 * kSetMs));
  CHECK(s.take_due_respawn(kSetT0 + 100 * kSetMs));
  CHECK_FALSE(s.respawn_held());
  CHECK(s.next_replacement().kind == Step::kReplace);
}

TEST_CASE("init failures in a row back the respawn off from 100 ms, doubling, to 5 s at most") {
  const auto [failures, backoff_ms] = GENERATE(table<std::uint32_t, std::int64_t>(
      {{1, 100}, {2, 200}, {3, 400}, {6, 3200}, {7, 5000}, {12, 5000}}));
  WorkerSet s(1, set_limits());
  for (std::uint32_t i = 0; i < failures; ++i) s.note_init_failure();
  CHECK(s.init_failures() == failures);
  s.back_off_init_failure(kSetT0);
  CHECK(s.respawn_due_ns() == kSetT0 + backoff_ms * kSetMs);
  s.note_ready();
  CHECK(s.init_failures() == 0);
  s.cancel_respawn();
  CHECK_FALSE(s.respawn_held());
}

TEST_CASE("crash_loop holds the respawn for its backoff, and a worker up stable_after ends it") {
  WorkerSet s(1, set_limits());
  set_spawn(s, 1);
  set_ready(s, 1, kSetT0);
  CHECK_FALSE(s.note_restart(kSetT0 + 10 * kSetMs));
  CHECK_FALSE(s.note_restart(kSetT0 + 20 * kSetMs));
  CHECK_FALSE(s.respawn_held());
  CHECK(s.note_restart(kSetT0 + 30 * kSetMs));  // the third within 1 s
  CHECK(s.crash_loop());
  CHECK(s.recent_restarts() == 3);
  CHECK(s.respawn_due_ns() == kSetT0 + 130 * kSetMs);
  CHECK(s.note_stable(kSetT0 + 499 * kSetMs) == nullptr);
  const Worker* stable = s.note_stable(kSetT0 + 500 * kSetMs);
  REQUIRE(stable != nullptr);
  CHECK(stable->id == 1);
  CHECK_FALSE(s.crash_loop());
  CHECK(s.note_stable(kSetT0 + 600 * kSetMs) == nullptr);  // not in crash_loop
}

TEST_CASE("the set counts the backtraces it awaits, and ready workers apart from live ones") {
  WorkerSet s(2, set_limits());
  set_spawn(s, 1);
  set_spawn(s, 2);
  set_ready(s, 1);
  CHECK(s.ready() == 1);
  CHECK(s.live() == 2);
  s.set_target(5);
  CHECK(s.target() == 5);
  s.await_backtrace();
  s.await_backtrace();
  s.backtrace_collected();
  CHECK(s.backtraces_awaited() == 1);
}
