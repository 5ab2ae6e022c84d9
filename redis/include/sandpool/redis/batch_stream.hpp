// The batch-entry layout of a Redis pool (docs/redis-batch-layout.md), slice 1: the core path.
// Up to 512 tasks of one band are ONE stream entry of the band's batch stream and one hash;
// their ids are one INCRBY; a node reads whole batches, takes each fenced, and appends its
// tasks' ends as packed records to the batch's ends string, fenced once per call; the entry is
// acknowledged when every task of the batch has a record. A task is found by id through the
// batch index. Opt-in per pool once wired (slices 2 and later: RedisFeeder, poold, config);
// claims, retries, cancels, waiters and dead letters are designed in the doc, built later.
//
// Thread-safety: none (it uses its caller's Connection); an immutable value once made.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/batch_layout.hpp>
#include <sandpool/redis/pool_keys.hpp>
#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis {

// A batch entry as a node read it: the batch and its tasks, unpacked and checked.
struct BatchEntry {
  std::string entry_id;  // in the band's batch stream
  Band band = 0;
  std::uint64_t first = 0;        // the first task's id: task i is first + i
  std::vector<StreamTask> tasks;  // in order
  // A bit per task that has an end record (batch_take.lua's end map): a claimed batch's tasks
  // that ended elsewhere; none for a fresh read.
  std::vector<bool> ended;
  // Set when the entry is not a batch this node can read (a field missing or out of range,
  // packed tasks that do not unpack): why. Its tasks are then empty and it is not taken.
  std::string malformed;
};

// A task of a batch, as lookup() finds it.
struct TaskInBatch {
  std::uint64_t id = 0, first = 0;
  std::uint32_t index = 0;
  std::string pool;
  // queued or running (the batch's), an end's state, or "moved" (its life goes on in the
  // per-task layout: its hash, PoolKeys::task_key(id)).
  std::string state;
  std::string node, entry_id;
  std::int64_t submitted_ms = 0;
  std::optional<batch::EndRecord> end;
};

class BatchStream {
 public:
  explicit BatchStream(const PoolKeys& keys) : keys_(keys), node_prefix_(keys.node_prefix) {}

  // The consumer group (PoolKeys::kGroup) on each band's batch stream, made when missing, and
  // the id counter started at PoolKeys::kFirstId when no submit of either layout started it.
  Status ensure_group(Connection& c) const;

  // Submits `tasks` (none scheduled, none with an idempotency key: batch::pack_tasks), split
  // by band (kBands order kept within each) and into batches of up to batch::kMaxTasks and
  // batch::kMaxBytes, one script each, pipelined in one round trip. Returns each task's id,
  // in the order given. Nothing is sent when a task is refused.
  struct Submitted {
    std::vector<std::uint64_t> ids;      // per task, in order
    std::vector<std::string> entry_ids;  // per batch made
  };
  Result<Submitted> submit(Connection& c, const std::vector<StreamTask>& tasks,
                           std::int64_t now_ms) const;

  // At most `count` new batch entries per band for `consumer` (one XREADGROUP over the three
  // batch streams, waiting up to `block` when none has any), then taken in one script, fenced
  // per entry: one that is no longer this consumer's is dropped from the answer. Two round
  // trips. A malformed entry is answered with `malformed` set, not taken (it stays pending
  // for this consumer until discarded: discard()).
  Result<std::vector<BatchEntry>> read(Connection& c, const std::string& consumer,
                                       std::size_t count, std::chrono::milliseconds block) const;
  // Fenced: acknowledges and deletes a malformed entry.
  Result<Fenced> discard(Connection& c, const BatchEntry& e, const std::string& consumer) const;

  // Fenced once for the call: appends the end records `ends` of tasks of batch `e` (each
  // record's index a task of it). A record of a task that already has one is skipped
  // (written[i] false). `acked`: every task of the batch has a record now, and its entry was
  // acknowledged and deleted. kNotYours (nothing written) when the entry is not pending for
  // `consumer`. One round trip.
  struct Ended {
    Fenced fenced = Fenced::kNotYours;
    bool acked = false;
    std::vector<bool> written;  // per record, in order
  };
  Result<Ended> end(Connection& c, const BatchEntry& e, const std::string& consumer,
                    const std::vector<batch::EndRecord>& ends, std::int64_t now_ms) const;

  // The ends of several batches (each its entry, first id, size and records), one batch_end
  // script each, pipelined in one round trip: per batch, in order, what end() answers.
  struct BatchEnds {
    std::string entry_id;
    Band band = 0;
    std::uint64_t first = 0;
    std::size_t n = 0;  // the batch's tasks
    std::vector<batch::EndRecord> ends;
  };
  Result<std::vector<Ended>> end_many(Connection& c, const std::string& consumer,
                                      const std::vector<BatchEnds>& batches,
                                      std::int64_t now_ms) const;

  // Liveness, as TaskConsumer::touch for the per-task streams: resets the idle time of the
  // batch entries (band, entry id) still pending for `consumer`. Returns how many.
  Result<std::size_t> touch(Connection& c, const std::string& consumer,
                            const std::vector<std::pair<Band, std::string>>& entries) const;
  // As TaskConsumer::claim_idle: up to `max` batch entries idle for `min_idle` whose node's
  // heartbeat key is gone (or `consumer`'s own idle ones), claimed and taken (batch_take.lua:
  // each with its end map, so that only the tasks with no record run again).
  Result<std::vector<BatchEntry>> claim_idle(Connection& c, const std::string& consumer,
                                             std::chrono::milliseconds min_idle,
                                             std::size_t max) const;

  // Task `id` of any pool's batch: nullopt when no batch holds it (a per-task task, or an
  // evicted batch). One round trip.
  Result<std::optional<TaskInBatch>> lookup(Connection& c, std::uint64_t id) const;

  const batch::BatchKeys& keys() const { return keys_; }

 private:
  BatchEntry parse_batch(const Reply& entry, Band band) const;
  // batch_take.lua over `out`'s well-formed entries: their end maps set, those no longer
  // `consumer`'s removed.
  Status take(Connection& c, const std::string& consumer, std::vector<BatchEntry>& out) const;

  batch::BatchKeys keys_;
  std::string node_prefix_;  // PoolKeys::node_prefix, the nodes' heartbeat keys
};

}  // namespace sandpool::redis
