// WatchdogGate: whether poold may feed systemd's watchdog, and which thread is stuck when
// it may not. poold's threads that take items of work (each pool's loop, the request
// thread, the job thread, the control server's thread) keep a BusyClock; the main loop
// samples them before each WATCHDOG=1 and /healthz samples them on each request. A thread
// inside one item of work for longer than the bound (half of WatchdogSec) is stuck: no ping,
// and /healthz answers 503 naming it. An idle thread is healthy however long it sleeps.
//
// Thread-safety: immutable after construction; every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandpool::poold {

// One sampled thread.
struct ThreadBusy {
  std::string name;              // sp-loop:<pool>, sp-request, sp-reads, sp-jobs, sp-control
  std::int64_t busy_for_ns = 0;  // inside its current item of work this long; 0: idle
};

class WatchdogGate {
 public:
  // The bound without a systemd watchdog (WatchdogSec unset): what /healthz judges by.
  static constexpr std::chrono::seconds kDefaultBound{15};

  // A thread inside one item of work for longer than `stuck_after` is stuck.
  explicit WatchdogGate(std::chrono::nanoseconds stuck_after) : stuck_after_(stuck_after) {}
  // The gate for a WatchdogSec of `watchdog_interval`: half of it; kDefaultBound when it is
  // zero (no watchdog).
  static WatchdogGate for_watchdog(std::chrono::microseconds watchdog_interval);

  std::chrono::nanoseconds stuck_after() const { return stuck_after_; }
  // Returns the thread that has been busy longest, when that is longer than the bound;
  // nullopt when every thread is idle or within it.
  std::optional<ThreadBusy> stuck(const std::vector<ThreadBusy>& threads) const;
  // Returns true iff no thread is stuck: the watchdog may be fed.
  bool may_ping(const std::vector<ThreadBusy>& threads) const { return !stuck(threads); }
  // "thread sp-loop:echo has been inside one item of work for 16.2 s (bound 15 s)".
  std::string describe(const ThreadBusy& thread) const;

 private:
  std::chrono::nanoseconds stuck_after_;
};

}  // namespace sandpool::poold
