// The batch-entry layout of a Redis pool (docs/redis-batch-layout.md): its keys and its two
// packed formats, a batch's tasks (one stream entry's `tasks` field) and a task's end record
// (appended to the batch's ends string). Both are versioned and length-prefixed, little-endian;
// every length is checked against what is left before it is used, so bytes read from Redis
// that are truncated, oversized or garbled are refused with an error naming what was wrong,
// never misread (docs/redis-batch-layout.md, "Packed formats").
//
// Thread-safety: pure functions and immutable values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/pool_keys.hpp>

namespace sandpool::redis::batch {

inline constexpr std::uint8_t kVersion = 1;          // of both formats
inline constexpr std::size_t kMaxTasks = 512;        // in one batch
inline constexpr std::size_t kMaxBytes = 16u << 20;  // of a batch's packed tasks
// Of one end record, its length prefix excluded: a bigger end (a large result or error) does
// not go into a batch's ends string (at most 512 x 64 KiB, so a lookup may read it whole);
// its task moves out to the per-task layout (docs/redis-batch-layout.md).
inline constexpr std::size_t kMaxEndBytes = 64u << 10;

// A batch's keys, beside PoolKeys' (P the prefix, {pool} the pool's name, F the batch's first
// task id, decimal).
struct BatchKeys {
  explicit BatchKeys(const PoolKeys& keys);

  // P{pool}:b:{band}: the bands' batch streams, apart from the per-task streams (q:), so that a
  // node that does not know the layout never reads a batch entry.
  const std::string& stream_key(Band band) const { return streams[PoolKeys::index_of(band)]; }
  // P{pool}:batch:F: the batch's hash (n, entry, band, state, node, takes, submitted_ms,
  // endmap, ended, finished_ms).
  std::string batch_key(std::uint64_t first) const;
  // P{pool}:batch:F:ends: its end records, appended.
  std::string ends_key(std::uint64_t first) const;
  // Member of the index for the batch of `first`: "F:{pool}".
  std::string index_member(std::uint64_t first) const;

  std::string prefix, pool;
  std::string ids;         // P:ids, the cluster's id counter (PoolKeys::ids)
  std::string index;       // P:batches, every pool's batches by first id
  std::string done;        // P{pool}:bdone, the finished batches by end time
  std::string streams[3];  // by PoolKeys::index_of(band): b:1, b:0, b:-1
};

// A batch's tasks as one string (the entry's `tasks` field): version, count, then per task
// its length and its record (docs/redis-batch-layout.md). Refused (kInvalidArgument): no task,
// more than kMaxTasks, a field past its width, a task scheduled or with an idempotency key
// (those keep the per-task layout), or more than kMaxBytes in all.
Result<std::string> pack_tasks(const StreamTask* tasks, std::size_t count);
// The same, of the tasks `tasks` points at (a band's tasks picked out of a submit, uncopied).
Result<std::string> pack_tasks(const StreamTask* const* tasks, std::size_t count);
// The tasks of `blob`, which must hold exactly `expect` (the entry's `n`). kProtocol, naming
// the first thing wrong, when it is not a version-1 blob of `expect` well-formed records with
// nothing after them.
Result<std::vector<StreamTask>> unpack_tasks(std::string_view blob, std::size_t expect);

// One task's record in its batch's ends string.
struct EndRecord {
  enum class Kind : std::uint8_t {
    kEnd = 1,    // the task ended here (state completed, dead_lettered, cancelled, ...)
    kMoved = 2,  // it left for the per-task layout (a retry, a letter, a cancel, a waiter)
  };
  std::uint32_t index = 0;  // in the batch: the task's id is the batch's first + index
  Kind kind = Kind::kEnd;
  std::int64_t finished_ms = 0;
  std::uint32_t attempts = 0;  // made in all
  std::string state, reason, error, result;
  std::vector<std::string> attempt_log;  // each attempt, encoded by the caller

  bool operator==(const EndRecord&) const = default;
};

// Appends `r` to `out` as one length-prefixed record. kInvalidArgument when a field is past
// its width (state and reason 255 bytes) or index past kMaxTasks; kTooLarge when the record
// would be over kMaxEndBytes.
Status pack_end(const EndRecord& r, std::string& out);
// The records of `blob` (an ends string, or one record), each index below `tasks` and kMaxTasks.
// kProtocol, naming the first thing wrong, when a record is truncated, over kMaxEndBytes, of
// another version or kind, longer than what is left, or not wholly used by its fields.
Result<std::vector<EndRecord>> unpack_ends(std::string_view blob, std::size_t tasks);

}  // namespace sandpool::redis::batch
