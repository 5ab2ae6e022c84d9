// Small checks shared by the task stream's files (task_*.cpp, batch_stream.cpp): a number read
// whole from a reply's string, the error for a reply of the wrong shape, a submit's answer, and
// the group read both layouts make over their three band streams.
#pragma once

#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/pool_keys.hpp>
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

// One plain XREADGROUP of `consumer` over the three band streams `streams` (its reply is not
// made Lua tables and back): answers at once when some band has entries, else blocks up to
// `block` (0: not at all) for the first to come. COUNT holds per stream. nullopt: nothing
// came (the server's nil); else the reply, one element per stream that had entries.
inline Result<std::optional<Reply>> read_group(Connection& c, const std::string& consumer,
                                               const std::string (&streams)[3], std::size_t count,
                                               std::chrono::milliseconds block) {
  std::vector<std::string> args = {"XREADGROUP", "GROUP", PoolKeys::kGroup,
                                   consumer,     "COUNT", std::to_string(count)};
  if (block.count() > 0) {
    args.push_back("BLOCK");
    args.push_back(std::to_string(block.count()));
  }
  args.push_back("STREAMS");
  args.insert(args.end(), std::begin(streams), std::end(streams));
  args.insert(args.end(), std::size(streams), ">");
  auto w = c.command(args);
  if (!w) return w.status();
  if (w->is_error()) return w->status();
  if (w->is_nil()) return std::optional<Reply>();
  return std::optional<Reply>(std::move(w).value());
}

}  // namespace sandpool::redis
