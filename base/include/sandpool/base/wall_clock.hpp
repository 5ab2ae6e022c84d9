// The wall clock in Unix milliseconds: what records, letters and events carry as their time
// (the steady clock orders and times; this one is shown and stored).
#pragma once

#include <chrono>
#include <cstdint>

namespace sandpool {

inline std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace sandpool
