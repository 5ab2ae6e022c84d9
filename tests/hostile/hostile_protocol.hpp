// Orders for tests/hostile/plugins/hostile_protocol.c, built from the real layout and codec
// so the C plugin needs no copy of either.
#pragma once

#include <cstddef>
#include <string>

#include <sandpool/ipc/layout.hpp>
#include <sandpool/ipc/messages.hpp>

namespace sandpool::hostile {

// Lower-case hex of every byte of `bytes`.
inline std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The "forge" task's payload: `count` records of `kind` carrying `body` (its first 8 bytes
// replaced by the task's id when `patch_id`), then `then` ("wait" or "exit").
inline std::string forge_order(ipc::MsgKind kind, int count, bool patch_id, const std::string& then,
                               const std::string& body) {
  constexpr std::size_t ring = offsetof(ipc::RegionHeader, result_ring);
  return std::to_string(offsetof(ipc::RegionHeader, result_ring_offset)) + " " +
         std::to_string(offsetof(ipc::RegionHeader, result_ring_bytes)) + " " +
         std::to_string(ring + offsetof(ipc::RingControl, head)) + " " +
         std::to_string(ring + offsetof(ipc::RingControl, tail)) + " " +
         std::to_string(static_cast<unsigned>(kind)) + " " + std::to_string(count) + " " +
         (patch_id ? "1 " : "0 ") + then + " " + hex(body);
}

}  // namespace sandpool::hostile
