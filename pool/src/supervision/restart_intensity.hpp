// RestartIntensity: OTP-style restart intensity for one pool (docs/architecture.md, "Supervision
// (decisions)"). More than max_restarts unexpected worker exits within `window` put the pool in
// crash_loop, where each replacement waits an exponentially growing backoff (base doubling up to
// max) until a worker has stayed ready for stable_after. Pure: times are CLOCK_MONOTONIC ns given
// by the caller, so it is unit-tested with a hand-moved clock.
//
// Which exits count is the caller's decision (pool_core: crashes, missed heartbeats and
// protocol errors do; kills for a user's cancel or a task's own timeout do not).
// Thread-safety: none; the pool's loop thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

namespace sandpool::supervision {

class RestartIntensity {
 public:
  struct Limits {
    std::uint32_t max_restarts = 10;
    std::chrono::milliseconds window{60000};
    std::chrono::milliseconds backoff_base{100};
    std::chrono::milliseconds backoff_max{10000};
    std::chrono::milliseconds stable_after{5000};
  };

  explicit RestartIntensity(Limits limits) : limits_(limits) {}
  void set_limits(Limits limits) { limits_ = limits; }

  // Records one unexpected exit at `now`. Returns true iff this exit put the pool into
  // crash_loop (it was not in it before).
  bool note_restart(std::int64_t now_ns);
  // Returns true iff a worker ready since `ready_ns` has been up long enough (stable_after)
  // to take the pool out of crash_loop, and takes it out. False when not in crash_loop.
  bool note_stable(std::int64_t ready_ns, std::int64_t now_ns);

  bool crash_loop() const { return crash_loop_; }
  // In crash_loop, the earliest time the next replacement may start; 0 otherwise.
  std::int64_t respawn_not_before() const { return crash_loop_ ? not_before_ns_ : 0; }
  // Unexpected exits within the window, as of the last note_restart.
  std::size_t recent() const { return times_.size(); }

 private:
  Limits limits_;
  std::deque<std::int64_t> times_;  // unexpected exits within the window, oldest first
  bool crash_loop_ = false;
  std::uint32_t backoffs_ = 0;  // restarts since entering crash_loop
  std::int64_t not_before_ns_ = 0;
};

}  // namespace sandpool::supervision
