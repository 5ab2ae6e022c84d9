// Small checks shared by TaskStream's files (task_stream*.cpp): a number read whole from a
// reply's string, and the error for a reply of the wrong shape.
#pragma once

#include <charconv>
#include <string>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis {

// `s` as a number, all of it; false when it is not one (or has anything after it).
template <typename T>
bool parse_number(const std::string& s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// A reply to `what` that is not what the script or command answers.
inline Status unexpected(const char* what, const Reply& r) {
  return Status::error(Code::kInternal, std::string("redis: unexpected reply to ") + what +
                                            (r.is_error() ? ": " + r.str : std::string()));
}

}  // namespace sandpool::redis
