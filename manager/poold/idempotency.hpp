// IdempotencyKeys: submit's idempotency keys, mapped to the task they created, so that a
// resubmit with the same key returns that task instead of running it again. Bounded by
// count (the oldest key goes first) and by age (a key older than max_age is forgotten).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace sandpool::poold {

// Thread-safety: every member may be called from any thread.
class IdempotencyKeys {
 public:
  using Clock = std::chrono::steady_clock;
  IdempotencyKeys(std::size_t max_keys, std::chrono::milliseconds max_age)
      : max_keys_(max_keys), max_age_(max_age) {}

  // The task recorded for `key`, if any (and not expired).
  std::optional<std::uint64_t> find(const std::string& key, Clock::time_point now = Clock::now());
  // Records key -> task (a later remember() of the same key wins).
  void remember(const std::string& key, std::uint64_t task_id,
                Clock::time_point now = Clock::now());
  std::size_t size() const;

 private:
  void evict(Clock::time_point now);  // mu_ held

  struct Entry {
    std::uint64_t task_id;
    Clock::time_point at;
  };
  const std::size_t max_keys_;
  const std::chrono::milliseconds max_age_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> keys_;
  std::deque<std::pair<std::string, Clock::time_point>> order_;  // insertion order
};

}  // namespace sandpool::poold
