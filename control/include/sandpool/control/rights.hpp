// What a control-socket peer may do; shared by the config's allow-list and the control server.
#pragma once

#include <cstdint>
#include <string_view>

namespace sandpool {

// read: status/stats/workers/events/task; admin: everything.
enum class Rights : std::uint8_t { kNone, kRead, kAdmin };

// "none", "read", "admin".
inline std::string_view to_string(Rights r) {
  switch (r) {
    case Rights::kNone:
      return "none";
    case Rights::kRead:
      return "read";
    case Rights::kAdmin:
      return "admin";
  }
  return "none";
}

}  // namespace sandpool
