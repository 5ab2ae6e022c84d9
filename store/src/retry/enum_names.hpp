// Reading the vocabulary's names (task.hpp's to_string) back from the database.
#pragma once

#include <optional>
#include <string_view>

#include <sandpool/task/task.hpp>

namespace sandpool {

// Returns the enumerator whose to_string() is `name`; enumerators run from 0 to `last`.
template <typename E>
std::optional<E> parse_enum(std::string_view name, E last) {
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    if (to_string(static_cast<E>(i)) == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace sandpool
