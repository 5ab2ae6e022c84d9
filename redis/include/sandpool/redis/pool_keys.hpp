// A Redis pool's keys (docs/redis-pools.md, "Keys"), named once for the three classes that
// change them by caller: TaskProducer (task_producer.hpp: poold's service side), TaskConsumer
// (task_consumer.hpp: the feeder's reads and fenced ends) and TaskUpkeep (task_upkeep.hpp:
// the beat's chores and the rate limits). Also the values they share: a task as submitted, a
// stream entry as read, a task's hash as stored.
//
// Priority bands: a pool has one stream per band (P:{pool}:q:1 for priority above 0, q:0 for 0,
// q:-1 below 0). A node reads the higher bands first; within a band, its local pool orders
// what it read by the exact priority. An entry stays in its band's stream: every script on it
// names that stream.
//
// Thread-safety: PoolKeys is an immutable value once made; copy it freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/task/task_options.hpp>

namespace sandpool::redis {

// A task as submitted: what its stream entry carries.
struct StreamTask {
  std::string type;
  std::string payload;  // binary-safe
  // The entry carries timeout, retries, priority, key, idempotency_key and tenant (its
  // fields; queue_ttl and fail_fast are not carried). not_before set: the task is scheduled,
  // not queued, until then; it waits in the pool's later set and every node's move_due()
  // adds its entry when due (an entry read back has none).
  TaskOptions options;
};

// A priority band: its stream is P:{pool}:q:{band}.
using Band = std::int8_t;
inline constexpr Band kBands[] = {1, 0, -1};  // the order a node reads them in
inline Band band_of(std::int32_t priority) {
  return priority > 0 ? Band{1} : priority < 0 ? Band{-1} : Band{0};
}

// An entry a node read (or claimed): the stream entry's id and the task.
struct StreamEntry {
  std::string entry_id;  // the stream's id, "1700000000000-0"
  Band band = 0;         // the stream it is in (ids are unique within a stream only)
  std::uint64_t task_id = 0;
  StreamTask task;
  std::uint64_t deliveries = 0;  // from XPENDING or the claim: how often the group handed it out
  std::uint32_t attempts = 0;    // attempts made so far, on any node (take())
  // Read by this node's plain read (TaskConsumer::read: not claimed, not read back from a
  // file): `attempts` is the task's count in Redis until this node records more, and the
  // task held no lease of a type's cap then (each script that lets an entry go gives its
  // lease back). `leased`: this node took one for it since (TaskUpkeep::take_tokens).
  bool read_here = false;
  bool leased = false;
  // Set when the entry is not a task (no id or type, an option that does not parse): why.
  // Its other fields are unspecified; the reader discards it.
  std::string malformed;
};

// A task's account as its hash holds it.
struct StoredTask {
  std::uint64_t id = 0;
  std::string pool, type, state, result, error, reason, node, entry_id;
  std::uint32_t attempts = 0;
  // Each attempt as JSON (feeder::encode: the compact form the hash stores most in is read
  // back as it), in order.
  std::vector<std::string> history;
  std::int64_t submitted_ms = 0, finished_ms = 0;
  std::int64_t not_before_ms = 0;  // scheduled: not queued before (wall ms); 0: none
  std::string tenant;
  // How many ends were written (`ends`): 1 once it ended, one more per run after a replay
  // of its dead letter; more than that means an end was written twice.
  std::uint32_t ends = 0;
};

// The answer of a fenced change: done, or refused because the entry is not pending for this
// consumer any more (another node claimed it, or it ended).
enum class Fenced : std::uint8_t { kDone, kNotYours };

// What a pool keeps in Redis (service.redis.*): finished tasks (their hashes and attempts)
// within a count, an age and the bytes of their results and errors, oldest evicted first;
// dead letters within a count, newest kept. TaskConsumer::end_all evicts past the count and
// keeps the letters; TaskUpkeep::trim_finished evicts past the age and bytes.
struct PoolLimits {
  std::uint64_t finished = 100000;
  std::int64_t finished_max_age_ms = 3600000;
  std::uint64_t finished_max_bytes = 64ULL << 20;
  std::uint64_t letters = 10000;
};

// The keys of pool `pool` under `prefix` (service.redis.prefix, "sandpool:"); P below is
// the prefix, {pool} the pool's name.
struct PoolKeys {
  PoolKeys(std::string prefix, std::string pool);

  // The one consumer group of every band's stream (lib.lua's `GROUP` is made from it).
  static constexpr const char* kGroup = "sandpool";
  // Cluster task ids start at kFirstId (2^52), above every id a poold gives its local tasks
  // (those start at the wall clock in ms x 1000, about 1.8e15 in 2026, and reach 2^52 in
  // 2112), and below 2^53, so that JSON readers that hold numbers as doubles read them whole.
  // An id is a cluster id iff it is kFirstId or more.
  static constexpr std::uint64_t kFirstId = std::uint64_t{1} << 52;

  const std::string& stream_key(Band band = 0) const { return streams[index_of(band)]; }
  const std::string& stream_of(const StreamEntry& e) const { return stream_key(e.band); }
  // P:task:ID, a task's hash (every pool's tasks share the id counter P:ids).
  std::string task_key(std::uint64_t id) const { return prefix + "task:" + std::to_string(id); }
  // P:schedule:<name>, for every pool (a schedule's name is the cluster's).
  std::string schedule_claim_key(const std::string& schedule) const;
  // The key of the pool's rate bucket ("pool", ""), a task type's ("type", T) or a tenant's
  // ("tenant", N): P{pool}:rate:KIND[:NAME].
  std::string rate_key(const std::string& kind, const std::string& name) const;
  // The set of a task type's leases (concurrency_per_type): P{pool}:running:TYPE.
  std::string cap_key(const std::string& type) const;

  static std::size_t index_of(Band band) { return static_cast<std::size_t>(1 - band); }

  std::string prefix, pool;
  std::string ids;          // P:ids, the cluster's id counter
  std::string later;        // P{pool}:later, the scheduled and deferred tasks by due time
  std::string done;         // P{pool}:done, the finished tasks by end time
  std::string done_bytes;   // P{pool}:done:bytes, their results' and errors' bytes
  std::string letters;      // P{pool}:dlq, the dead-letter stream
  std::string node_prefix;  // P:node:, the nodes' heartbeat keys
  std::string streams[3];   // by index_of(band): q:1, q:0, q:-1
};

}  // namespace sandpool::redis
