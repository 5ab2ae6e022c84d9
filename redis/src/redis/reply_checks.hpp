// Small checks shared by the task stream's files (task_*.cpp): a number read whole from a
// reply's string, the error for a reply of the wrong shape, and a submit's answer.
#pragma once

#include <charconv>
#include <string>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/redis_client.hpp>
#include <sandpool/redis/task_producer.hpp>

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

// A submit's answer ({id, 1}, or {the first task's id, 0}: submit.lua; submit_batch.lua's for a
// task whose key named one): the id and whether the idempotency key named an earlier task, or
// the server's error.
inline Result<TaskProducer::Submitted> submitted(const Reply& r) {
  if (r.is_error()) return r.status();
  if (r.elements.size() != 2 || r.elements[0].type != Reply::Type::kInteger ||
      r.elements[1].type != Reply::Type::kInteger ||
      (r.elements[1].integer != 0 && r.elements[1].integer != 1)) {
    return unexpected("submit", r);
  }
  return TaskProducer::Submitted{static_cast<std::uint64_t>(r.elements[0].integer),
                                 r.elements[1].integer == 0};
}

// A submit sent whose reply was lost: it may have run (Redis stalled past the reply timeout,
// or the connection broke after the send).
// Code::kTimeout, the wait for the reply ran out (or broke), with "outcome unknown" said.
inline Status outcome_lost(const Status& why) {
  if (why.code() != Code::kUnavailable) return why;
  return Status::error(Code::kTimeout, "outcome unknown: " + why.message() +
                                           ": the submit was sent and its reply lost, so it " +
                                           "may have been accepted");
}

}  // namespace sandpool::redis
