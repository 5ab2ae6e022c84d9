#include <sandpool/service/watchdog_gate.hpp>

#include <cstdio>

namespace sandpool::poold {
namespace {

// Seconds with one decimal: "16.2 s".
std::string seconds_text(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

WatchdogGate WatchdogGate::for_watchdog(std::chrono::microseconds watchdog_interval) {
  if (watchdog_interval.count() <= 0) return WatchdogGate(kDefaultBound);
  return WatchdogGate(watchdog_interval / 2);
}

std::optional<ThreadBusy> WatchdogGate::stuck(const std::vector<ThreadBusy>& threads) const {
  const ThreadBusy* worst = nullptr;
  for (const ThreadBusy& t : threads) {
    if (t.busy_for_ns <= stuck_after_.count()) continue;
    if (worst == nullptr || t.busy_for_ns > worst->busy_for_ns) worst = &t;
  }
  if (worst == nullptr) return std::nullopt;
  return *worst;
}

std::string WatchdogGate::describe(const ThreadBusy& thread) const {
  return "thread " + thread.name + " has been inside one item of work for " +
         seconds_text(thread.busy_for_ns) + " (bound " + seconds_text(stuck_after_.count()) + ")";
}

}  // namespace sandpool::poold
