// IdempotencyKeys: submit's idempotency keys, mapped to the task each created, so that a
// resubmit with the same key returns that task instead of running it again. A key keeps the
// task's final account once the task ended, so that the promise holds after the pool has
// forgotten the task (its records are bounded separately, by count and bytes): a resubmit
// is answered from what the key kept.
//
// Bounds: count (the oldest key goes first), age (a key older than max_age is forgotten),
// and the bytes of the final accounts kept (results, errors, backtraces). Over the byte
// bound, results go first, oldest first (the account says so: result_dropped); only when
// no result is left to drop do whole keys go, oldest first.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/task/task.hpp>

namespace sandpool::poold {

struct IdempotencyLimits {
  std::size_t max_keys = 100000;
  std::chrono::milliseconds max_age{std::chrono::hours(1)};  // 0: no age bound
  std::uint64_t max_bytes = 64u << 20;                       // of kept final accounts
};

// What a key kept of its task.
struct KeptTask {
  std::uint64_t task_id = 0;
  std::optional<TaskResult> final;  // set once the task ended
  bool result_dropped = false;      // final->result was dropped to stay within max_bytes
};

// Thread-safety: every member may be called from any thread; mu_ is a leaf.
class IdempotencyKeys {
 public:
  using Clock = std::chrono::steady_clock;
  explicit IdempotencyKeys(IdempotencyLimits limits) : limits_(limits) {}

  // What `key` kept, if it is known (and not expired).
  std::optional<KeptTask> find(const std::string& key, Clock::time_point now = Clock::now())
      EXCLUDES(mu_);
  // Records key -> task. A later remember() of the same key for another task wins; for the
  // same task (which may have ended, and been recorded, first) it keeps the final account.
  void remember(const std::string& key, std::uint64_t task_id, Clock::time_point now = Clock::now())
      EXCLUDES(mu_);
  // Forgets `key` if it still names `task_id` (a submit refused after remember(): the
  // journal did not take its task).
  void forget(const std::string& key, std::uint64_t task_id) EXCLUDES(mu_);
  // The task submitted with `key` ended: the key keeps its final account (and is
  // remembered now if the task ended before remember() ran).
  void task_ended(const std::string& key, const TaskResult& result,
                  Clock::time_point now = Clock::now()) EXCLUDES(mu_);
  // A task ended that a key may name (a replay keeps its task's id): that key keeps the
  // final account. Nothing happens for a task no key names.
  void task_ended(const TaskResult& result, Clock::time_point now = Clock::now()) EXCLUDES(mu_);

  std::size_t size() const EXCLUDES(mu_);
  std::uint64_t kept_bytes() const EXCLUDES(mu_);

 private:
  struct Entry {
    KeptTask kept;
    Clock::time_point at;         // when remembered: the age bound counts from here
    std::uint64_t bytes = 0;      // of kept.final
    std::uint64_t final_seq = 0;  // which keep_final() stored kept.final (results_ order)
  };
  void keep_final(const std::string& key, Entry& e, const TaskResult& result) REQUIRES(mu_);
  void erase(std::unordered_map<std::string, Entry>::iterator it) REQUIRES(mu_);
  void evict(Clock::time_point now) REQUIRES(mu_);
  void drop_results() REQUIRES(mu_);

  const IdempotencyLimits limits_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> keys_ GUARDED_BY(mu_);
  std::unordered_map<std::uint64_t, std::string> by_task_ GUARDED_BY(mu_);  // id -> its key
  // Remember order.
  std::deque<std::pair<std::string, Clock::time_point>> order_ GUARDED_BY(mu_);
  // (key, final_seq), oldest first.
  std::deque<std::pair<std::string, std::uint64_t>> results_ GUARDED_BY(mu_);
  std::uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  std::uint64_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace sandpool::poold
