// The wall clock in Unix milliseconds: what records, letters and events carry as their time
// (the steady clock orders and times; this one is shown and stored).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace sandpool {

// A wall-clock time as ms since the epoch (truncated toward zero).
inline std::int64_t wall_ms_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

inline std::int64_t wall_clock_ms() { return wall_ms_of(std::chrono::system_clock::now()); }

// The wall-clock time `ms` ms after the epoch; nullopt when it is outside the system clock's
// range (about 292 years either side of 1970), where the conversion would overflow: a time
// read from a file, a peer or Redis is checked through this.
inline std::optional<std::chrono::system_clock::time_point> wall_time_of_ms(std::int64_t ms) {
  constexpr std::int64_t kMax = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::duration::max())
                                    .count();
  if (ms > kMax || ms < -kMax) return std::nullopt;
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

}  // namespace sandpool
