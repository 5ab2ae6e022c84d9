// BusyClock: when one thread started the item of work it is inside, for a watchdog on
// another thread (poold's WatchdogGate). The thread calls begin() as it takes an item of
// work (a loop iteration, a job, a request) and end() before it waits for the next one, so
// an idle thread reads as healthy however long it sleeps, and a thread stuck inside one
// item reads as busy for longer and longer.
//
// Thread-safety: begin()/end() by the owning thread, busy_for_ns() from any thread (one
// relaxed atomic: a reader may see the state a moment late, which a watchdog whose bound is
// seconds does not mind). Times are monotonic nanoseconds, from whichever clock the owner
// uses for both begin() and busy_for_ns() (now_ns() unless it has one of its own).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sandpool {

class BusyClock {
 public:
  // steady_clock in nanoseconds (CLOCK_MONOTONIC on Linux).
  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // The owning thread starts an item of work at `now_ns` (> 0).
  void begin(std::int64_t now_ns) { since_ns_.store(now_ns, std::memory_order_relaxed); }
  // The owning thread is done with it and about to wait for the next.
  void end() { since_ns_.store(kIdle, std::memory_order_relaxed); }

  // Returns how long the thread has been inside its current item of work at `now_ns`, or
  // 0 while it is idle.
  std::int64_t busy_for_ns(std::int64_t now_ns) const {
    const std::int64_t since = since_ns_.load(std::memory_order_relaxed);
    return since == kIdle || now_ns < since ? 0 : now_ns - since;
  }

 private:
  static constexpr std::int64_t kIdle = 0;
  std::atomic<std::int64_t> since_ns_{kIdle};
};

}  // namespace sandpool
