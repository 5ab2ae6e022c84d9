// The producer side of a Redis pool (docs/redis-pools.md, "A task's way through Redis"):
// what poold's service does for its clients. Submits (one, many, a schedule's slot), cancels,
// waits for an end, reads a task, the dead letters (and their replay and purge) and the
// pool's summary. Nothing here is fenced: none of it holds an entry.
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

namespace lua {
struct Submit;  // the submit script's arguments (src/redis/task_stream_scripts.hpp)
}  // namespace lua

class TaskProducer {
 public:
  explicit TaskProducer(PoolKeys keys) : keys_(std::move(keys)) {}

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
  // Each task submitted as submit() does (the same entry and hash), in order: one script per
  // 512 tasks or 16 MiB of payloads (their new ids taken with one INCRBY; a task whose
  // idempotency key names a task, in Redis or earlier in the batch, answers that task's id,
  // `existing`), pipelined in one round trip; one answer per task, in order. The tasks of a
  // call whose reply was lost are kTimeout ("outcome unknown").
  Result<std::vector<Result<Submitted>>> submit_many(Connection& c,
                                                     const std::vector<StreamTask>& tasks,
                                                     std::int64_t now_ms) const;
  // waiting out a backoff: it ends `cancelled`); else the task is flagged and the node that
  // runs it cancels it at its next beat (cancel_asked), and it is not run again: a retry,
  // a hand-back or a move of the flagged task ends it `cancelled` (retry, release, move_due).
  // kNotFound: Redis does not know it.
  struct Cancelled {
    bool asked = false;  // false: it had ended already
    std::string state;   // its state after the call
  };
  Result<Cancelled> cancel(Connection& c, std::uint64_t id, std::int64_t now_ms) const;
  // Waits up to `block` (above 0, below the connection's reply timeout) for task `id` to
  // end; returns its final state, or nullopt when it had not ended by then. The wait is
  // registered in the task's hash (`await`), so that the script that writes its end tells it
  // (the `end:` list P:end:ID, which only awaited tasks get), and the registration and a
  // BLPOP on that list go out together: one round trip. A task that ended already answers at
  // once. kNotFound: Redis does not know the task.
  Result<std::optional<std::string>> await_end(Connection& c, std::uint64_t id,
                                               std::chrono::milliseconds block) const;
  // One round of a node's waits on many tasks (poold's waits thread): registers the waits
  // of `fresh` as await_end() does (an end already written is told at once), then BLPOPs the
  // end lists of `awaited` and the list `wake` (another thread pushes there to end the round
  // early) for up to `block` (above 0, below the connection's reply timeout), all in one
  // round trip. An end list holds one push per end and waiter registration, and a BLPOP takes
  // it: a waiter on another node may miss it, so a caller registers its waits again now and
  // then (each registration of an ended task pushes again).
  struct AwaitRound {
    std::vector<std::uint64_t> unknown;  // of `fresh`: Redis does not know them
    std::uint64_t ended = 0;             // the task whose end was popped; 0: none
    std::string state;                   // its final state
    bool woken = false;                  // `wake` was pushed to
    // With one task awaited, its hash read right after its end was popped (the reads go out
    // behind the BLPOP, which Redis answers first: no round trip of their own): set when
    // `ended` is that task and Redis knew it.
    std::optional<StoredTask> account;
  };
  Result<AwaitRound> await_any(Connection& c, const std::vector<std::uint64_t>& fresh,
                               const std::vector<std::uint64_t>& awaited, const std::string& wake,
                               std::chrono::milliseconds block) const;
  // The task's hash, or kNotFound: its attempts and ends as stored_task() reads them. One
  // round trip (its hash and the attempts list older versions wrote, pipelined).
  Result<StoredTask> task(Connection& c, std::uint64_t id) const;
  // The commands task() sends for task `id`, in order, for a caller that pipelines many.
  std::vector<std::vector<std::string>> task_reads(std::uint64_t id) const;
  // Task `id` from the replies to task_reads(): the hash's fields; its attempts, those of the
  // `P:task:ID:attempts` list (written before session 24) then the hash's `attempt:N`
  // fields by N; its ends, the hash's `ends` (counted by the scripts that end a task without
  // finish_batch.lua, and by older versions) plus its `end:ENTRY` fields (finish_batch.lua).
  // nullopt when the hash is empty or the replies are not those of the reads.
  static std::optional<StoredTask> stored_task(std::uint64_t id, const Reply& hash,
                                               const Reply& attempts);
  // The task's state as its hash says it; nullopt when Redis does not know the task. One
  // HGET, not the whole hash (whose result may be large).
  Result<std::optional<std::string>> task_state(Connection& c, std::uint64_t id) const;
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

  const PoolKeys& keys() const { return keys_; }

 private:
  // task()'s two reads, queued (append_task_reads) then read (read_task): both replies are
  // read whatever the first says, so that a pipeline stays in step.
  Status append_task_reads(Connection& c, std::uint64_t id) const;
  Result<StoredTask> read_task(Connection& c, std::uint64_t id) const;
  Connection::Call submit_call(const StreamTask& t, std::int64_t now_ms) const;
  lua::Submit submit_args(const StreamTask& t, std::int64_t now_ms) const;
  Result<LetterSweep> sweep_letters(Connection& c, bool replay, const LetterMatch& m,
                                    std::int64_t now_ms, std::int64_t max_timeout_ms,
                                    std::size_t chunk) const;

  PoolKeys keys_;
};

}  // namespace sandpool::redis
