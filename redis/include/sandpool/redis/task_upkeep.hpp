// A Redis pool's upkeep (docs/redis-pools.md): what every node's beat does for the whole
// pool, whoever submitted or holds its tasks: the consumer group made, the node's heartbeat
// key, due tasks moved back to their streams, old finished tasks evicted; and the cluster-wide
// rate limits and caps the feeder takes from before it runs a task.
//
// Thread-safety: none (it uses its caller's Connection); an immutable value once made.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/pool_keys.hpp>
#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis {

class TaskUpkeep {
 public:
  // `limits`: the age and bytes of finished tasks trim_finished() keeps.
  explicit TaskUpkeep(PoolKeys keys, const PoolLimits& limits = {})
      : keys_(std::move(keys)),
        finished_max_age_ms_(limits.finished_max_age_ms),
        finished_max_bytes_(limits.finished_max_bytes) {}

  // Creates the consumer group (and the stream) unless they exist, and sets the id counter
  // to start at kFirstId unless it is set.
  Status ensure_group(Connection& c) const;
  // Moves the later tasks due by `now_ms` (at most `max`: retries after their backoff,
  // scheduled tasks) to their band's stream, atomically; returns how many moved. A task asked
  // to cancel while it ran (cancel()) ends `cancelled` instead, and counts as moved. Any node
  // may run it.
  Result<std::size_t> move_due(Connection& c, std::int64_t now_ms, std::size_t max) const;
  // Evicts the finished tasks older than the age bound, then the oldest while their results
  // and errors take more than the byte bound, at most `max`; returns how many. Any node may
  // run it (each beat).
  Result<std::size_t> trim_finished(Connection& c, std::int64_t now_ms, std::size_t max) const;
  // The node's heartbeat key P:node:<name>, set to `identity` for `ttl`, unless another
  // identity holds it: then that identity (the name is another live node's).
  static Result<std::optional<std::string>> beat(Connection& c, const std::string& prefix,
                                                 const std::string& name,
                                                 const std::string& identity,
                                                 std::chrono::milliseconds ttl);

  // Rate limits, cluster-wide (task_stream_rate.cpp; docs/redis-pools.md, "Rate limits"): a
  // token bucket per limit in a hash of its own, which every node takes from.
  struct Bucket {
    std::string key;  // rate_key()
    // As this node's config says (a RateLimit): `tasks` (at least 1) per `per_ms`, up to
    // `burst` at once.
    std::uint32_t tasks = 1;
    std::int64_t per_ms = 1000;
    std::uint32_t burst = 1;
  };
  // Takes one token from each of `buckets`, all or none, on Redis's clock (TIME), so the
  // nodes' clocks do not matter. Not taken: how long until the bucket that is the furthest
  // from a whole token has one, and which that is (its index in `buckets`).
  struct Taken {
    bool taken = false;
    std::int64_t wait_ms = 0;
    std::size_t worst = 0;
    bool not_yours = false;  // fenced: the held entry is not pending for the consumer any more
  };
  // A cap on a task type's running tasks across the cluster (concurrency_per_type): a lease
  // per running task in the set `key` (cap_key()), which the task's hash names (`lease`) and
  // every script that ends, defers, throttles or hands back the task gives back. A task
  // that holds a lease already (claimed from a dead node) keeps it.
  struct Cap {
    std::string key;
    std::uint32_t max = 1;
    std::uint64_t task_id = 0;
  };
  // With `cap`: the lease is checked before the tokens (refused: `worst` is buckets.size()
  // and `wait_ms` a short retry delay) and taken with them, all or none. With `held`: fenced
  // as the scripts of a held entry are; when it is not pending for `consumer` any more
  // (another node claimed it, and may have ended it), nothing is taken (`not_yours`), so no
  // lease is left that no end of this task would give back.
  Result<Taken> take_tokens(Connection& c, const std::vector<Bucket>& buckets,
                            const std::optional<Cap>& cap = std::nullopt,
                            const StreamEntry* held = nullptr,
                            const std::string& consumer = {}) const;
  // Fenced: a task over a rate limit waits in the later set, unrun and with no attempt
  // counted (its hash says `queued`, `throttled` counts these). It is due `wait_ms` after
  // `now_ms` (the node's clock, as the later set's every score), and no sooner than one
  // interval of `worst` after the task deferred before it on that bucket, so that a backlog
  // comes back at the bucket's rate rather than all at once. Answers the due time; nullopt:
  // not this consumer's entry.
  Result<std::optional<std::int64_t>> throttle(Connection& c, const StreamEntry& e,
                                               const std::string& consumer, const Bucket& worst,
                                               std::int64_t wait_ms, std::int64_t now_ms) const;

  const PoolKeys& keys() const { return keys_; }

 private:
  PoolKeys keys_;
  std::int64_t finished_max_age_ms_;
  std::uint64_t finished_max_bytes_;
};

}  // namespace sandpool::redis
