#include "core/death_charge.hpp"

namespace sandpool::core {

std::optional<std::size_t> charged_entry(std::span<const RingEntry> ring,
                                         std::uint64_t killed_for) {
  if (killed_for != 0) {
    for (std::size_t i = 0; i < ring.size(); ++i) {
      if (ring[i].task_id == killed_for) {
        if (ring[i].ended) return std::nullopt;
        return i;
      }
    }
    return std::nullopt;
  }
  if (ring.empty() || ring.front().ended) return std::nullopt;
  return 0;
}

}  // namespace sandpool::core
