// A Redis pool's tasks in Redis (docs/redis-pools.md, "Keys" and "A task's way through
// Redis"): the pool's stream and consumer group, each task's hash, and the Lua scripts that
// change them. Every change a node makes to a task it holds is fenced: the script first checks
// that the task's entry is still pending for the node's consumer, so that a node wrongly
// thought dead (its entries claimed by another) cannot write a second attempt or end.
//
// Priority bands: a pool has one stream per band (P:{pool}:q:1 for priority above 0, q:0 for 0,
// q:-1 below 0). A node reads the higher bands first; within a band, its local pool orders
// what it read by the exact priority. An entry stays in its band's stream: every script on it
// names that stream.
//
// Thread-safety: none (it uses its caller's Connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/task/task_options.hpp>

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis {

namespace lua {
struct Submit;  // the submit script's arguments (src/redis/task_stream_scripts.hpp)
}  // namespace lua

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
  // Set when the entry is not a task (no id or type, an option that does not parse): why.
  // Its other fields are unspecified; the reader discards it.
  std::string malformed;
};

// A task's account as its hash holds it.
struct StoredTask {
  std::uint64_t id = 0;
  std::string pool, type, state, result, error, reason, node, entry_id;
  std::uint32_t attempts = 0;
  std::vector<std::string> history;  // each attempt, as the caller encoded it
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

class TaskStream {
 public:
  // What a pool keeps in Redis (service.redis.*): finished tasks (their hashes and
  // attempts) within a count, an age and the bytes of their results and errors, oldest
  // evicted first; dead letters within a count, newest kept.
  struct Limits {
    std::uint64_t finished = 100000;
    std::int64_t finished_max_age_ms = 3600000;
    std::uint64_t finished_max_bytes = 64ULL << 20;
    std::uint64_t letters = 10000;
  };
  // `prefix` is service.redis.prefix ("sandpool:"); the pool's keys hang below it. The
  // finished tasks kept past the count are evicted, oldest first, by end_all(); past the age
  // and bytes, by trim_finished().
  TaskStream(std::string prefix, std::string pool, std::uint64_t max_finished = 100000,
             std::uint64_t max_letters = 10000);
  TaskStream(std::string prefix, std::string pool, const Limits& limits);

  // Cluster task ids start at kFirstId (2^52), above every id a poold gives its local tasks
  // (those start at the wall clock in ms x 1000, about 1.8e15 in 2026, and reach 2^52 in
  // 2112), and below 2^53, so that JSON readers that hold numbers as doubles read them whole.
  // An id is a cluster id iff it is kFirstId or more.
  static constexpr std::uint64_t kFirstId = std::uint64_t{1} << 52;
  // Creates the consumer group (and the stream) unless they exist, and sets the id counter
  // to start at kFirstId unless it is set.
  Status ensure_group(Connection& c) const;
  // Makes `consumer` a consumer of every band's stream (XGROUP CREATECONSUMER; XREADGROUP
  // makes one only when it returns entries), so that a node that serves the pool counts as
  // one of its nodes (refused()) before it read anything.
  Status join(Connection& c, const std::string& consumer) const;
  // Takes a cluster-wide id, writes the task's hash (queued) and adds its entry to its band's
  // stream, in one script; a task with a `not_before_ms` still to come is `scheduled` in the
  // later set instead. An idempotency key already used answers the first task's id, with
  // `existing`, and adds nothing.
  struct Submitted {
    std::uint64_t id = 0;
    bool existing = false;  // the idempotency key named an earlier task: nothing was added
  };
  Result<Submitted> submit(Connection& c, const StreamTask& t, std::int64_t now_ms) const;
  // A schedule's slot in this pool (docs/schedules.md, "Redis pools"): claims slot `slot_s`
  // of schedule `schedule` for `node` and submits `t` as submit() does, in one script, so no
  // crash comes between the claim and the task. The claim is the schedule's hash
  // (schedule_claim_key: the latest slot claimed, its task, its node, cluster-wide). A slot
  // after the one held is won: the task is made and the hash moves to it. A slot at or before
  // it is lost: nothing is made, and the answer is the hash's task and node (so a slot that
  // went by, fired again after a restart or by a node whose clock lags, is never a second
  // task). A slot more than kMaxSlotLeadSeconds ahead of Redis's clock (TIME) is refused: a
  // node whose clock ran ahead would take every node's slots until then.
  // While the hash holds the schedule paused (set_schedule_paused), no slot is won: the
  // answer is `paused`, the last slot's task and the node that paused it.
  struct SlotClaim {
    std::uint64_t task_id = 0;
    bool won = false;
    bool paused = false;
    std::string node;  // the claim's node (or the pausing node); "" when the hash names none
  };
  static constexpr std::int64_t kMaxSlotLeadSeconds = 3600;
  Result<SlotClaim> claim_slot(Connection& c, const StreamTask& t, const std::string& schedule,
                               std::int64_t slot_s, const std::string& node,
                               std::int64_t now_ms) const;
  // Pauses (or resumes) schedule `schedule` on every node: its claim hash holds `paused` (the
  // node that paused it) and `paused_ms`, and claim_slot wins nothing while it does.
  Status set_schedule_paused(Connection& c, const std::string& schedule, bool paused,
                             const std::string& node, std::int64_t now_ms) const;
  // P:schedule:<name>, for every pool (a schedule's name is the cluster's).
  std::string schedule_claim_key(const std::string& schedule) const;
  // Each task submitted as submit() does (the same entry and hash), in order: one script per
  // 512 tasks or 16 MiB of payloads (their new ids taken with one INCRBY; a task whose
  // idempotency key names a task, in Redis or earlier in the batch, answers that task's id,
  // `existing`), pipelined in one round trip; one answer per task, in order. The tasks of a
  // call whose reply was lost are kTimeout ("outcome unknown").
  Result<std::vector<Result<Submitted>>> submit_many(Connection& c,
                                                     const std::vector<StreamTask>& tasks,
                                                     std::int64_t now_ms) const;
  // XREADGROUP for `consumer`: at most `count` new entries, the higher bands first (one
  // XREADGROUP a band, while some of `count` is left), and their tasks taken as take() does
  // (a script: one more round trip). When there are none,
  // waits up to `block` (0: not) for entries of any band, reads at most `count` of each band
  // that has some then (so up to 3 x count when several bands receive some at the same
  // moment), and takes them (a second round trip). An entry that is not a task comes back
  // with `malformed` set, its hash untouched.
  Result<std::vector<StreamEntry>> read(Connection& c, const std::string& consumer,
                                        std::size_t count, std::chrono::milliseconds block) const;
  // The entries (just read or claimed) are this consumer's: each task's hash says `running`
  // on `consumer` (a plain XADD's task gets its hash here), and each entry's `attempts` is
  // filled from it; one round trip. Fenced per entry: one no longer pending for `consumer`
  // (this node stalled past claim_after since it read it, and another claimed it, perhaps
  // ended it), or given twice (the second), is removed from `entries`, its hash untouched.
  Status take(Connection& c, const std::string& consumer, std::vector<StreamEntry>& entries) const;
  // Fenced: acknowledges and deletes an entry that is not a task (malformed).
  Result<Fenced> discard(Connection& c, const StreamEntry& e, const std::string& consumer) const;
  // Fenced, per entry: appends to the task of `entries[i]` the ended attempt `attempts[i]`
  // (encoded by the caller) and counts it, pipelined in one round trip; one answer per entry.
  Result<std::vector<Fenced>> record_attempts(Connection& c,
                                              const std::vector<const StreamEntry*>& entries,
                                              const std::string& consumer,
                                              const std::vector<std::string>& attempts) const;
  // The same, for one entry.
  Result<Fenced> record_attempt(Connection& c, const StreamEntry& e, const std::string& consumer,
                                const std::string& attempt) const;
  // Fenced, per end: the tasks' ends, each with the attempts to record first, one script
  // per 512 ends (their entries acknowledged and deleted, the finished set added to and
  // trimmed, once per call), pipelined in one round trip; one answer per end, in order. An end
  // writes the final state, result, error and reason, acknowledges and deletes the entry, indexes
  // the task among the finished ones. Exactly once: a second end of the same entry is kNotYours. A
  // `dead_lettered` end also adds the letter to the pool's dead-letter stream (the entry's fields,
  // the reason, the error, the time), which keeps the newest `max_letters`.
  struct EndWrite {
    const StreamEntry* entry = nullptr;
    std::vector<std::string> attempts;  // encoded by the caller
    std::string state, result, error, reason;
    std::int64_t now_ms = 0;
  };
  Result<std::vector<Fenced>> end_all(Connection& c, const std::string& consumer,
                                      const std::vector<EndWrite>& ends) const;
  // Fenced: hands an entry back, unrun (this node stops, or cannot take it now): acknowledged
  // and deleted, and added again as a new entry that any node may read; no attempt is
  // counted. A task asked to cancel (cancel()) ends `cancelled` instead.
  Result<Fenced> release(Connection& c, const StreamEntry& e, const std::string& consumer) const;
  // Fenced: counts a node's refusal to run the task (its local pool refused it as invalid: a
  // type, timeout or payload that node's config does not accept), once per entry and node,
  // and names the node among the task's refusers. A task refused kMaxRefusals times in all
  // and by every live node of the pool (a consumer of its streams whose heartbeat key lives)
  // is left to the caller to end `rejected` (kReject: nothing written but the count); any
  // other waits `pause` in the later set (kDeferred, due at `due_ms`; any node's move_due()
  // hands it out again), so the node that refused it does not read it again at once.
  // kNotYours (refusals 0) when the entry is not this consumer's.
  struct Refusal {
    enum class Verdict : std::uint8_t { kNotYours, kDeferred, kReject };
    Verdict verdict = Verdict::kNotYours;
    std::uint32_t refusals = 0;  // the task's, this one included
    std::int64_t due_ms = 0;     // kDeferred: when it is due
  };
  Result<Refusal> refused(Connection& c, const StreamEntry& e, const std::string& consumer,
                          std::int64_t now_ms, std::chrono::milliseconds pause) const;
  static constexpr std::uint32_t kMaxRefusals = 5;
  // Fenced: an attempt failed and may be retried. While the task has retries left after
  // `attempts` (its attempts on every node at most 1 + `retries`), records them and defers
  // it to the later set for its backoff (kDeferred: any node's move_due() hands it out
  // again when due); else writes nothing (kExhausted: the caller ends it, with `attempts`;
  // kCancelled: the task was asked to cancel, the caller ends it `cancelled`, the same).
  struct Backoff {
    std::int64_t base_ms = 100;
    double multiplier = 2.0;
    std::int64_t max_ms = 30000;
    double jitter = 1.0;  // in [0, 1]: the fraction of the ceiling waited (full jitter)
  };
  enum class Retried : std::uint8_t { kDeferred, kExhausted, kNotYours, kCancelled };
  Result<Retried> retry(Connection& c, const StreamEntry& e, const std::string& consumer,
                        const std::vector<std::string>& attempts, std::uint32_t retries,
                        const Backoff& backoff, std::int64_t now_ms) const;
  // Cancels task `id` of this pool: at once when no node runs it (queued and not read yet, or
  // waiting out a backoff: it ends `cancelled`); else the task is flagged and the node that
  // runs it cancels it at its next beat (cancel_asked), and it is not run again: a retry,
  // a hand-back or a move of the flagged task ends it `cancelled` (retry, release, move_due).
  // kNotFound: Redis does not know it.
  struct Cancelled {
    bool asked = false;  // false: it had ended already
    std::string state;   // its state after the call
  };
  Result<Cancelled> cancel(Connection& c, std::uint64_t id, std::int64_t now_ms) const;
  // Of `ids` (tasks this node runs), which were asked to cancel; one round trip.
  Result<std::vector<bool>> cancel_asked(Connection& c,
                                         const std::vector<std::uint64_t>& ids) const;
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
  // Waits up to `block` (above 0, below the connection's reply timeout) for task `id` to
  // end; returns its final state, or nullopt when it had not ended by then. The wait is
  // registered in the task's hash (`await`), so that the script that writes its end tells it
  // (the `end:` list P:end:ID, which only awaited tasks get), and the registration and a
  // BLPOP on that list go out together: one round trip. A task that ended already answers at
  // once. kNotFound: Redis does not know the task.
  Result<std::optional<std::string>> await_end(Connection& c, std::uint64_t id,
                                               std::chrono::milliseconds block) const;
  // The task's hash, or kNotFound.
  Result<StoredTask> task(Connection& c, std::uint64_t id) const;
  // The task's state as its hash says it; nullopt when Redis does not know the task. One
  // HGET, not the whole hash (whose result may be large).
  Result<std::optional<std::string>> task_state(Connection& c, std::uint64_t id) const;

  // Liveness. touch() keeps the entries this consumer runs fresh (their idle time 0), so that
  // claim_idle() on other nodes never takes a live node's task; an entry no longer pending
  // for this consumer is left alone (it is another's now). Returns how many were touched.
  Result<std::size_t> touch(Connection& c, const std::string& consumer,
                            const std::vector<std::pair<Band, std::string>>& entries) const;
  // Claims for `consumer` the entries idle for `min_idle` or more whose node's heartbeat key
  // (beat()) is gone: those of dead nodes (a live one touches its own every beat and keeps
  // its key), and `consumer`'s own idle ones (a previous run's: it touches what it holds). Up
  // to `max`, the higher bands first, looping over the pending list; each with its delivery
  // count after the claim.
  Result<std::vector<StreamEntry>> claim_idle(Connection& c, const std::string& consumer,
                                              std::chrono::milliseconds min_idle,
                                              std::size_t max) const;
  // The pool's dead letters, newest first, at most `max`, from the one before entry `before`
  // of the dead-letter stream on ("": from the newest): each its entry id and the entry's
  // fields plus reason, error and dead_lettered_ms, by field name.
  struct Letter {
    std::string entry_id;
    std::vector<std::pair<std::string, std::string>> fields;
  };
  Result<std::vector<Letter>> dead_letters(Connection& c, std::size_t max,
                                           const std::string& before = "") const;

  // Replay and purge of the pool's dead letters (docs/redis-pools.md, "Dead letters: replay and
  // purge"). Which letters: an absent member matches any; with `task_id` the sweep looks for that
  // task's letter, newest first, and stops at it (a task has one letter at a time: a replay removes
  // it). Without, it goes oldest first up to the newest letter when it began, so that a
  // replayed task that dies again (a new letter, after that one) is not replayed twice.
  struct LetterMatch {
    std::optional<std::string> type, reason;
    std::optional<std::uint64_t> task_id;
    std::optional<std::int64_t> from_ms, until_ms;  // dead_lettered_ms >= from, < until
  };
  struct LetterSweep {
    std::vector<std::uint64_t> replayed;  // the tasks put back, in the order of their letters
    std::uint64_t purged = 0;
    std::uint64_t refused = 0;  // letters a replay left in place (their task is live, ...)
    std::string first_refusal;  // why the first was; "" when none
    // Ok: the sweep went to its end. Else why it stopped part way (Redis unreachable, an
    // error of the server): what the members above say was done, before it.
    Status stopped;
  };
  // Letters per script call: Redis runs one script at a time, so a sweep blocks it for one
  // chunk's work at most (a few ms), and the nodes' scripts run between the chunks.
  static constexpr std::size_t kLetterChunk = 256;
  // Each matching letter, in one script with its removal from the dead-letter stream, goes
  // back into the pool's stream as its task: the same id, type, payload and options, a fresh
  // count of attempts (the hash's attempts and history are cleared, its state `queued`, it
  // leaves the finished set). So two replays of one letter at once give one task: the second
  // finds it gone. A letter is left (`refused`) when its task is live (queued, waiting out a
  // backoff), when it is not a task (no id or type), or when its timeout_ms is over
  // `max_timeout_ms` (the pool's task_defaults.max_timeout).
  Result<LetterSweep> replay_letters(Connection& c, const LetterMatch& m, std::int64_t now_ms,
                                     std::int64_t max_timeout_ms,
                                     std::size_t chunk = kLetterChunk) const;
  // Deletes each matching letter (the task's hash stays, until evicted as a finished task).
  Result<LetterSweep> purge_letters(Connection& c, const LetterMatch& m,
                                    std::size_t chunk = kLetterChunk) const;

  // What `status` shows of the pool in Redis: the streams (summed over the bands), the pending
  // entries, the later and finished tasks, the dead letters, and each consumer of the group
  // (over the bands: its pending entries summed, its least idle time; alive: its node's
  // heartbeat key exists).
  struct Consumer {
    std::string name;
    std::uint64_t pending = 0;
    std::int64_t idle_ms = 0;
    bool alive = false;
  };
  struct Summary {
    std::uint64_t length = 0, pending = 0, later = 0, finished = 0, dead_letters = 0;
    std::vector<Consumer> consumers;
  };
  Result<Summary> summary(Connection& c) const;

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
  // The key of the pool's bucket ("pool", ""), a task type's ("type", T) or a tenant's
  // ("tenant", N).
  std::string rate_key(const std::string& kind, const std::string& name) const;
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
  std::string cap_key(const std::string& type) const;
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

  const std::string& stream_key(Band band = 0) const { return streams_[index_of(band)]; }
  static constexpr const char* kGroup = "sandpool";

 private:
  StreamEntry parse_entry(const Reply& entry, Band band) const;
  Connection::Call submit_call(const StreamTask& t, std::int64_t now_ms) const;
  lua::Submit submit_args(const StreamTask& t, std::int64_t now_ms) const;
  Result<LetterSweep> sweep_letters(Connection& c, bool replay, const LetterMatch& m,
                                    std::int64_t now_ms, std::int64_t max_timeout_ms,
                                    std::size_t chunk) const;

  static std::size_t index_of(Band band) { return static_cast<std::size_t>(1 - band); }
  const std::string& stream_of(const StreamEntry& e) const { return stream_key(e.band); }

  std::uint64_t max_finished_, max_letters_;
  std::int64_t finished_max_age_ms_ = 3600000;
  std::uint64_t finished_max_bytes_ = 64ULL << 20;
  std::string prefix_, pool_, later_, done_, done_bytes_, letters_;
  std::string streams_[3];  // by index_of(band): q:1, q:0, q:-1
};

}  // namespace sandpool::redis
