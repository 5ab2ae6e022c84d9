// The consumer side of a Redis pool (docs/redis-pools.md, "A task's way through Redis"):
// what a node's feeder does with the entries it holds. Reads and takes entries, claims a dead
// node's, records attempts, writes ends, hands entries back, counts refusals, defers retries,
// keeps its entries fresh. Every change to a task the node holds is fenced: the script first
// checks that the task's entry is still pending for the node's consumer, so that a node
// wrongly thought dead (its entries claimed by another) cannot write a second attempt or end.
//
// Thread-safety: none (it uses its caller's Connection); an immutable value once made.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>

#include <sandpool/redis/pool_keys.hpp>
#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis {

class TaskConsumer {
 public:
  // `limits`: the finished tasks and dead letters end_all() keeps (their counts).
  explicit TaskConsumer(PoolKeys keys, const PoolLimits& limits = {})
      : keys_(std::move(keys)), keep_finished_(limits.finished), keep_letters_(limits.letters) {}

  // Makes `consumer` a consumer of every band's stream (XGROUP CREATECONSUMER; XREADGROUP
  // makes one only when it returns entries), so that a node that serves the pool counts as
  // one of its nodes (refused()) before it read anything.
  Status join(Connection& c, const std::string& consumer) const;
  // At most `count` new entries for `consumer`, the higher bands first, then their tasks
  // taken as take() does: one XREADGROUP over every band (waiting up to `block`, 0: not, when
  // none has any), then one script. When several bands had entries, the read got up to
  // `count` of each: what is beyond `count` in band order goes back in the same script,
  // unread and in its place for any node's next read (so the consumer never holds more than
  // `count` of this read), or as new entries when another node read past them meanwhile.
  // Two round trips. An entry that is not a task comes back with `malformed` set, its hash
  // untouched.
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
  //
  // `attempts_before`: the task's attempts in Redis before this end's, when the caller knows
  // them and that the task holds no lease of a cap (attempts_known()): the end then reads
  // nothing of the task's hash, one HSET its only command on it. Else (a claimed entry, a
  // lease, an end read back from a file) the script reads them, and gives the lease back.
  struct EndWrite {
    const StreamEntry* entry = nullptr;
    std::vector<std::string> attempts;  // encoded by the caller
    std::string state, result, error, reason;
    std::int64_t now_ms = 0;
    std::optional<std::uint32_t> attempts_before{};
  };
  // `e.attempts` when the entry was read here and took no lease since (StreamEntry::read_here),
  // so that an end of it needs nothing read; else nullopt.
  static std::optional<std::uint32_t> attempts_known(const StreamEntry& e) {
    if (!e.read_here || e.leased) return std::nullopt;
    return e.attempts;
  }
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
  // Of `ids` (tasks this node runs), which were asked to cancel; one round trip.
  Result<std::vector<bool>> cancel_asked(Connection& c,
                                         const std::vector<std::uint64_t>& ids) const;

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

  const PoolKeys& keys() const { return keys_; }

 private:
  StreamEntry parse_entry(const Reply& entry, Band band) const;
  // take(), and first the entries `back` (per band, kBands order) handed back unread.
  Status take(Connection& c, const std::string& consumer, std::vector<StreamEntry>& entries,
              const std::vector<std::string_view> (&back)[3]) const;

  PoolKeys keys_;
  std::uint64_t keep_finished_, keep_letters_;
};

}  // namespace sandpool::redis
