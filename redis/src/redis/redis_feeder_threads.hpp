// What RedisFeeder's threads share beyond its members (redis_feeder.cpp, the reader;
// redis_feeder_writer.cpp, the writer; redis_feeder_beat.cpp, the beat): the clocks, the
// reconnection backoff and the encoding of an attempt.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include <sandpool/base/status.hpp>
#include <sandpool/pool/pool.hpp>

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis::feeder {

using Clock = std::chrono::steady_clock;
// A connection that fails is opened again after kRetryFirst, doubling up to kRetryMax.
inline constexpr std::chrono::milliseconds kRetryFirst{100}, kRetryMax{2000};

// The wall clock in ms since the epoch, as Redis's records hold it.
inline std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An ended attempt as a task's hash records it (JSON, invalid UTF-8 replaced): the bytes
// encode_json() gives, written without a json object when its strings are ASCII.
std::string encode(const Attempt& a);
std::string encode_json(const Attempt& a);
// An ended attempt as a task's hash stores it (`attempt:N`): one with no error and no
// backtrace (most) in a compact form, "NUMBER OUTCOME PID STARTED_MS DURATION_MS", at most
// kMaxCompact bytes, so that the hash stays a listpack (Redis turns a hash with a value over
// hash-max-listpack-value, 64 by default, into a hashtable: 3x its memory); any other as
// encode() writes it. stored_as_json() gives encode()'s JSON back for either.
inline constexpr std::size_t kMaxCompact = 64;
std::string encode_stored(const Attempt& a);
std::string stored_as_json(std::string stored);

// The error of the `lost` attempt a claimed task gets (the node running it died).
// Returns true iff the local pool stopped the task rather than ended it: by this node's
// shutdown, by the end of a pool a reload replaced or removed, or by this node's pool failing
// (crash_loop: its workers cannot start, and the task never ran here: one that did ended with
// its attempt). Not the task's end: it goes back to the stream for another node (or this one
// once it is back, or the pool that replaced it), and no attempt is counted.
inline bool stopped_here(const TaskResult& r) {
  return (r.state == TaskState::kDeadLettered &&
          (r.reason == DeadReason::kShutdown || r.reason == DeadReason::kPoolRemoved ||
           r.reason == DeadReason::kCrashLoop)) ||
         (r.state == TaskState::kCancelled && r.cancel_reason == CancelReason::kShutdown);
}

inline std::string lost_error(const std::string& claimant) {
  return "the node running it died (claimed by " + claimant + ")";
}

// Opens a connection, retrying with backoff until it works or `stopped()` holds (nullopt).
template <typename Stop>
std::optional<Connection> connect(const Endpoint& e, Stop stopped,
                                  const std::function<void(const Status&)>& note) {
  std::chrono::milliseconds wait = kRetryFirst;
  while (!stopped()) {
    auto c = Connection::open(e);
    note(c.status());
    if (c) return std::move(c).value();
    std::this_thread::sleep_for(wait);
    wait = std::min(kRetryMax, wait * 2);
  }
  return std::nullopt;
}

}  // namespace sandpool::redis::feeder
