// The Autoscaler alone (autoscaler.hpp): each rule of docs/architecture.md, "The autoscaler",
// as a table of views and the step it decides, with a hand-moved clock and no pool.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/autoscaler.hpp"

using namespace std::chrono_literals;
using sandpool::AutoscalePolicy;
using sandpool::WorkerBounds;
using sandpool::core::Autoscaler;
using sandpool::core::AutoscaleStep;
using sandpool::core::AutoscaleView;
using sandpool::core::ReadyWorkerIdle;

namespace {

constexpr std::int64_t kAsMs = 1000000;
constexpr std::int64_t kAsT0 = 1'000'000 * kAsMs;  // far from the "never stepped" sentinel

// 1..4 workers, target wait 50 ms, a step of 1, cooldown 200 ms, idle timeout 1 s.
AutoscalePolicy as_policy(std::uint32_t step = 1) {
  AutoscalePolicy a;
  a.enabled = true;
  a.target_queue_wait = 50ms;
  a.scale_up_step = step;
  a.cooldown = 200ms;
  a.idle_timeout = 1000ms;
  return a;
}

using Kind = AutoscaleStep::Kind;

struct UpRow {
  const char* rule;
  std::uint32_t min, max, step, target;
  std::int64_t wait_ms;
  bool starting, crash_loop, respawn_pending, frozen;
  Kind kind;
  std::uint32_t want;  // the new target when a step
};

}  // namespace

TEST_CASE("the autoscaler steps up on a queue wait past the target, within its rules") {
  const UpRow row = GENERATE(values<UpRow>({
      {"a wait past the target steps up by scale_up_step", 1, 4, 1, 1, 60, 0, 0, 0, 0, Kind::kUp,
       2},
      {"a bigger step is cut at max", 1, 4, 3, 2, 60, 0, 0, 0, 0, Kind::kUp, 4},
      {"a wait at the target is not past it", 1, 4, 1, 1, 50, 0, 0, 0, 0, Kind::kNone, 0},
      {"no task waits and no worker is idle: no step", 1, 4, 1, 1, -1, 0, 0, 0, 0, Kind::kNone, 0},
      {"at max it never steps up", 1, 4, 1, 4, 900, 0, 0, 0, 0, Kind::kNone, 0},
      {"a worker still starting holds the step", 1, 4, 1, 2, 900, 1, 0, 0, 0, Kind::kNone, 0},
      {"crash_loop holds the step", 1, 4, 1, 2, 900, 0, 1, 0, 0, Kind::kNone, 0},
      {"a crash backoff holding a respawn holds the step", 1, 4, 1, 2, 900, 0, 0, 1, 0, Kind::kNone,
       0},
      {"a closing or failed pool does not scale", 1, 4, 1, 2, 900, 0, 0, 0, 1, Kind::kNone, 0},
      {"at target 0 a waiting task starts one worker at once", 0, 4, 3, 0, 0, 0, 0, 0, 0, Kind::kUp,
       1},
      {"at target 0 even crash_loop and a backoff start the one worker", 0, 4, 1, 0, 0, 1, 1, 1, 0,
       Kind::kUp, 1},
      {"at target 0 with max 0 nothing starts", 0, 0, 1, 0, 900, 0, 0, 0, 0, Kind::kNone, 0},
  }));
  INFO(row.rule);
  Autoscaler a(as_policy(row.step), WorkerBounds{row.min, row.max});
  a.start(kAsT0);
  AutoscaleView v;
  v.queue_wait_ns = row.wait_ms < 0 ? -1 : row.wait_ms * kAsMs;
  v.target = row.target;
  v.worker_starting = row.starting;
  v.crash_loop = row.crash_loop;
  v.respawn_pending = row.respawn_pending;
  v.frozen = row.frozen;
  const AutoscaleStep s = a.decide(kAsT0, v);
  CHECK(s.kind == row.kind);
  if (row.kind != Kind::kNone) {
    CHECK(s.target == row.want);
    CHECK_FALSE(s.reason.empty());
  }
  CHECK(a.queue_wait_ns() == (row.frozen ? -1 : v.queue_wait_ns));
}

TEST_CASE("a step up waits one cooldown after any step, and the reason names the wait") {
  Autoscaler a(as_policy(), WorkerBounds{1, 4});
  AutoscaleView v;
  v.queue_wait_ns = 80 * kAsMs;
  v.target = 1;
  AutoscaleStep s = a.decide(kAsT0, v);
  REQUIRE(s.kind == Kind::kUp);
  CHECK(s.reason == "autoscale up: queue wait 80 ms > target_queue_wait 50 ms");
  v.target = 2;
  CHECK(a.decide(kAsT0 + 199 * kAsMs, v).kind == Kind::kNone);
  CHECK(a.decide(kAsT0 + 200 * kAsMs, v).target == 3);
  // A manual scale counts as a step too.
  a.note_manual_step(kAsT0 + 300 * kAsMs);
  v.target = 3;
  CHECK(a.decide(kAsT0 + 499 * kAsMs, v).kind == Kind::kNone);
  CHECK(a.decide(kAsT0 + 500 * kAsMs, v).target == 4);
}

namespace {

struct DownRow {
  const char* rule;
  std::uint32_t min, target;
  std::vector<ReadyWorkerIdle> ready;       // last_work_ns in ms before now, idle
  std::int64_t since_up_ms, since_step_ms;  // -1: never
  Kind kind;
  std::uint32_t want;
};

}  // namespace

TEST_CASE("the autoscaler steps down by the workers idle for idle_timeout, within its rules") {
  const DownRow row = GENERATE(values<DownRow>({
      {"one worker idle a whole idle_timeout retires",
       1,
       2,
       {{1000, true}, {0, true}},
       -1,
       -1,
       Kind::kDown,
       1},
      {"all those due retire in one step",
       1,
       4,
       {{1000, true}, {1500, true}, {2000, true}, {10, true}},
       -1,
       -1,
       Kind::kDown,
       1},
      {"never below min", 2, 3, {{1000, true}, {1000, true}, {1000, true}}, -1, -1, Kind::kDown, 2},
      {"at min nothing retires", 2, 2, {{5000, true}, {5000, true}}, -1, -1, Kind::kNone, 0},
      {"idle just under idle_timeout does not count",
       1,
       2,
       {{999, true}, {999, true}},
       -1,
       -1,
       Kind::kNone,
       0},
      {"a worker with work is not idle however old its last work",
       1,
       2,
       {{5000, false}, {5000, false}},
       -1,
       -1,
       Kind::kNone,
       0},
      {"not within two cooldowns of a step up",
       1,
       2,
       {{5000, true}, {5000, true}},
       399,
       399,
       Kind::kNone,
       0},
      {"two cooldowns after a step up it may",
       1,
       2,
       {{5000, true}, {5000, true}},
       400,
       400,
       Kind::kDown,
       1},
      {"not within one cooldown of any step",
       1,
       2,
       {{5000, true}, {5000, true}},
       -1,
       199,
       Kind::kNone,
       0},
  }));
  INFO(row.rule);
  Autoscaler a(as_policy(), WorkerBounds{row.min, 4});
  const std::int64_t now = kAsT0 + 10'000 * kAsMs;
  if (row.since_up_ms >= 0) {
    AutoscaleView up;  // a step up, then (maybe) a later step
    up.queue_wait_ns = 900 * kAsMs;
    up.target = 1;
    REQUIRE(a.decide(now - row.since_up_ms * kAsMs, up).kind == Kind::kUp);
  }
  if (row.since_step_ms >= 0 && row.since_step_ms != row.since_up_ms) {
    a.note_manual_step(now - row.since_step_ms * kAsMs);
  }
  std::vector<ReadyWorkerIdle> ready;
  for (const ReadyWorkerIdle& w : row.ready) {
    ready.push_back({now - w.last_work_ns * kAsMs, w.idle});
  }
  AutoscaleView v;
  v.target = row.target;
  v.ready = ready;
  const AutoscaleStep s = a.decide(now, v);
  CHECK(s.kind == row.kind);
  if (row.kind == Kind::kDown) CHECK(s.target == row.want);
}

TEST_CASE("the reason for a step down names how many workers and how long they idled") {
  Autoscaler a(as_policy(), WorkerBounds{1, 4});
  const std::vector<ReadyWorkerIdle> ready = {{kAsT0 - 1500 * kAsMs, true},
                                              {kAsT0 - 1200 * kAsMs, true}};
  AutoscaleView v;
  v.target = 3;
  v.ready = ready;
  const AutoscaleStep s = a.decide(kAsT0, v);
  CHECK(s.target == 1);
  CHECK(s.reason == "autoscale down: 2 worker(s) idle for 1500 ms >= idle_timeout 1000 ms");
}

TEST_CASE(
    "the autoscaler looks every tick while tasks are open, else when a worker is due to "
    "idle out") {
  Autoscaler a(as_policy(), WorkerBounds{1, 4});
  CHECK(a.next_look_ns() == INT64_MAX);
  a.start(kAsT0);
  CHECK(a.due(kAsT0));
  CHECK(a.tick_ns() == 12'500'000);  // a quarter of 50 ms
  AutoscaleView v;
  v.target = 2;
  const std::vector<ReadyWorkerIdle> ready = {{kAsT0 - 300 * kAsMs, true},
                                              {kAsT0 - 100 * kAsMs, false}};
  v.ready = ready;
  CHECK(a.decide(kAsT0, v).kind == Kind::kNone);
  CHECK(a.next_look_ns() == INT64_MAX);  // until planned

  a.plan_next_look(kAsT0, true, 2, ready);
  CHECK(a.next_look_ns() == kAsT0 + a.tick_ns());

  a.decide(kAsT0, v);
  a.plan_next_look(kAsT0, false, 2, ready);
  CHECK(a.next_look_ns() == kAsT0 + 700 * kAsMs);  // the one idle since 300 ms reaches 1 s

  a.decide(kAsT0, v);
  a.plan_next_look(kAsT0, false, 2, {});
  CHECK(a.next_look_ns() == kAsT0 + a.tick_ns());  // only starting ones: once they are ready

  a.decide(kAsT0, v);
  a.plan_next_look(kAsT0, false, 1, ready);
  CHECK(a.next_look_ns() == INT64_MAX);  // at min, idle: nothing to look for

  v.frozen = true;
  a.decide(kAsT0, v);
  a.plan_next_look(kAsT0, true, 2, ready);
  CHECK(a.next_look_ns() == INT64_MAX);  // a closing pool is not looked at
}

TEST_CASE("a waiting task brings the next look within a tick, or to now at target 0") {
  Autoscaler a(as_policy(), WorkerBounds{0, 4});
  a.note_waiting(kAsT0, 2);
  CHECK(a.next_look_ns() == kAsT0 + a.tick_ns());
  a.note_waiting(kAsT0 + kAsMs, 0);
  CHECK(a.next_look_ns() == kAsT0 + kAsMs);

  AutoscalePolicy off = as_policy();
  off.enabled = false;
  Autoscaler b(off, WorkerBounds{1, 4});
  b.start(kAsT0);
  b.note_waiting(kAsT0, 0);
  CHECK(b.next_look_ns() == INT64_MAX);
  AutoscaleView v;
  v.queue_wait_ns = 900 * kAsMs;
  v.target = 1;
  CHECK(b.decide(kAsT0, v).kind == Kind::kNone);
  // A reconfigure turns it on: it looks now, within the new bounds.
  b.configure(as_policy(), WorkerBounds{2, 3}, kAsT0 + kAsMs);
  CHECK(b.next_look_ns() == kAsT0 + kAsMs);
  CHECK(b.clamp(1) == 2);
  CHECK(b.clamp(9) == 3);
}
