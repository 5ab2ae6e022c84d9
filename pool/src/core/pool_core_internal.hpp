// What the PoolCore sources share: units, limits and small helpers.
// Private to PoolCore's implementation.
#pragma once

#include <chrono>
#include <cstdint>

#include <sandpool/pool/pool.hpp>

namespace sandpool::core::detail {

inline constexpr std::int64_t kMsNs = 1000000;
// A task put back unstarted from this many dead workers' rings, each death charged to no
// task, is charged a `lost` attempt anyway: the "started" word is worker-writable, so a
// hostile worker claiming to be idle could otherwise keep a task from ever running out of
// attempts. (A death charged to some task is bounded by that task's attempts.)
inline constexpr std::uint32_t kMaxFreeRequeues = 20;

inline PoolEvent worker_event(PoolEvent::Kind kind, std::int32_t pid) {
  PoolEvent e;
  e.kind = kind;
  e.pid = pid;
  return e;
}

inline std::int64_t to_ns(std::chrono::milliseconds ms) { return ms.count() * kMsNs; }

// Returns true iff an attempt that ended this way is retried (docs/architecture.md, "Task states,
// outcomes and reasons").
inline bool retryable(Outcome o, bool sandbox_violation_too) {
  switch (o) {
    case Outcome::kError:
    case Outcome::kTimedOut:
    case Outcome::kLost:
    case Outcome::kResourceLimit:
    case Outcome::kProtocolError:
      return true;
    case Outcome::kSandboxViolation:
      return sandbox_violation_too;
    default:
      return false;
  }
}

}  // namespace sandpool::core::detail
