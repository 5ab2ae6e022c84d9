// Reading the vocabulary's names (task.hpp's to_string) back: from the database, from Redis,
// from a request. The one helper for "the enumerator this name names".
#pragma once

#include <optional>
#include <string_view>

#include <sandpool/task/task.hpp>

namespace sandpool {

// Returns the enumerator from `first` to `last` (by value) whose to_string() is `name`, or
// nullopt when none is.
template <typename E>
std::optional<E> parse_enum(std::string_view name, E first, E last) {
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i) {
    if (to_string(static_cast<E>(i)) == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// The same from E's first enumerator (value 0).
template <typename E>
std::optional<E> parse_enum(std::string_view name, E last) {
  return parse_enum(name, E{}, last);
}

}  // namespace sandpool
