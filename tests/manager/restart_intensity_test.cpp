// RestartIntensity (supervision/restart_intensity.hpp) with a hand-moved clock.
#include <catch2/catch.hpp>

#include "supervision/restart_intensity.hpp"

using namespace std::chrono_literals;
using sandpool::supervision::RestartIntensity;

namespace {
constexpr std::int64_t kNsPerMs = 1000000;

RestartIntensity::Limits limits() {
  RestartIntensity::Limits l;
  l.max_restarts = 3;
  l.window = 1000ms;
  l.backoff_base = 100ms;
  l.backoff_max = 1000ms;
  l.stable_after = 500ms;
  return l;
}
}  // namespace

TEST_CASE("more than max_restarts exits within the window enter crash_loop, fewer do not") {
  RestartIntensity r(limits());
  std::int64_t now = 10'000 * kNsPerMs;
  for (int i = 0; i < 3; ++i) CHECK_FALSE(r.note_restart(now += 100 * kNsPerMs));
  CHECK_FALSE(r.crash_loop());
  CHECK(r.respawn_not_before() == 0);
  CHECK(r.note_restart(now += 100 * kNsPerMs));  // the fourth within 1 s
  CHECK(r.crash_loop());
  CHECK(r.respawn_not_before() == now + 100 * kNsPerMs);
}

TEST_CASE("exits spread wider than the window never enter crash_loop") {
  RestartIntensity r(limits());
  std::int64_t now = 10'000 * kNsPerMs;
  for (int i = 0; i < 50; ++i) CHECK_FALSE(r.note_restart(now += 400 * kNsPerMs));
  CHECK_FALSE(r.crash_loop());
}

TEST_CASE("in crash_loop the backoff doubles up to its maximum") {
  RestartIntensity r(limits());
  std::int64_t now = 10'000 * kNsPerMs;
  for (int i = 0; i < 4; ++i) r.note_restart(now);
  REQUIRE(r.crash_loop());
  CHECK(r.respawn_not_before() == now + 100 * kNsPerMs);
  std::int64_t expected[] = {200, 400, 800, 1000, 1000};
  for (std::int64_t e : expected) {
    now += 2000 * kNsPerMs;  // past the last backoff
    CHECK_FALSE(r.note_restart(now));
    CHECK(r.respawn_not_before() == now + e * kNsPerMs);
  }
}

TEST_CASE("a worker that stays up for stable_after ends crash_loop, a shorter one does not") {
  RestartIntensity r(limits());
  std::int64_t now = 10'000 * kNsPerMs;
  for (int i = 0; i < 4; ++i) r.note_restart(now);
  REQUIRE(r.crash_loop());
  const std::int64_t ready = now + 200 * kNsPerMs;
  CHECK_FALSE(r.note_stable(ready, ready + 499 * kNsPerMs));
  CHECK(r.crash_loop());
  CHECK(r.note_stable(ready, ready + 500 * kNsPerMs));
  CHECK_FALSE(r.crash_loop());
  CHECK(r.respawn_not_before() == 0);
  CHECK(r.recent() == 0);                                     // a fresh count after a stable worker
  CHECK_FALSE(r.note_stable(ready, ready + 900 * kNsPerMs));  // not in crash_loop any more
}
