// Message i of a test stream: its size, kind and contents are functions of i, so the
// receiver checks each arrival, and its order, without keeping a copy of what was sent.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace sandpool::ipc::testing {

class NumberedMessages {
 public:
  // Mostly 0..199 bytes; every 1000th message is `big_bytes` long (make it exceed the ring
  // so it travels fragmented).
  explicit NumberedMessages(std::size_t big_bytes) : big_(big_bytes) {}

  std::size_t size_of(std::uint64_t i) const {
    return i % 1000 == 999 ? big_ : (i * 2654435761u >> 7) % 200;
  }
  static std::uint16_t kind_of(std::uint64_t i) { return static_cast<std::uint16_t>(1 + i % 3); }

  // Its index first (when it fits), then a fill byte.
  void build(std::uint64_t i, std::string* out) const {
    out->assign(size_of(i), fill_of(i));
    if (out->size() >= sizeof i) std::memcpy(out->data(), &i, sizeof i);
  }

  // Returns true iff (kind, m) is exactly message i.
  bool is_message(std::uint64_t i, std::uint16_t kind, const std::string& m) const {
    if (kind != kind_of(i) || m.size() != size_of(i)) return false;
    std::size_t from = 0;
    if (m.size() >= sizeof i) {
      std::uint64_t got = 0;
      std::memcpy(&got, m.data(), sizeof got);
      if (got != i) return false;
      from = sizeof i;
    }
    return m.find_first_not_of(fill_of(i), from) == std::string::npos;
  }

 private:
  static char fill_of(std::uint64_t i) { return static_cast<char>(i * 7); }
  std::size_t big_;
};

}  // namespace sandpool::ipc::testing
