// The Lua scripts that change a Redis pool's keys, run by TaskProducer, TaskConsumer and TaskUpkeep
// (task_*.cpp). Each script is its own file in lua/ (embedded at build time,
// redis/embed_lua.cmake), opened by lib.lua's helpers and `local GROUP` (PoolKeys::kGroup, the one
// consumer group); its first lines name its KEYS and ARGV. Each struct below is one script's
// arguments, its fields in that order: call() lays them out as the script reads them, so the layout
// is code on both sides. Fenced scripts open with pending_for(): the entry is still pending for the
// consumer.
//
// A struct's string_view fields view the caller's strings: build it, call(), and drop it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sandpool/redis/pool_keys.hpp>
#include <sandpool/redis/redis_client.hpp>
#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_upkeep.hpp>

namespace sandpool::redis::lua {

// submit.lua: a task into its band's stream (the later set when not due yet).
struct Submit {
  static const Script kScript;
  std::string ids{}, stream{}, idem{}, later{};  // KEYS; idem '' when none
  std::string_view prefix{}, pool{};
  std::int64_t now_ms = 0;
  std::string_view task_type{};
  std::int64_t not_before_ms = 0;  // 0: none
  Band band = 0;
  std::vector<std::string> fields{};  // the entry's field/value pairs
  Connection::Call call() const;
};

// submit_batch.lua: tasks submitted as Submit submits each, in order, in one script: the new
// ones' ids taken with one INCRBY.
struct SubmitBatch {
  static const Script kScript;
  static constexpr std::size_t kMaxTasks = 512;        // in one call
  static constexpr std::size_t kMaxBytes = 16u << 20;  // of payloads in one call, past its first
  std::string_view ids{}, later{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view prefix{}, pool{};
  std::int64_t now_ms = 0;
  // Per task: its idempotency key (a KEY), type, not_before_ms, band and fields, as in a
  // Submit; the Submit's ids, stream, later, prefix, pool and now_ms are not sent. Sent as
  // runs (submit_batch.lua names their layout): what consecutive tasks with no key and one
  // `payload` field share, all but the payload, is sent once.
  const Submit* tasks = nullptr;
  std::size_t count = 0;
  Connection::Call call() const;
};

// claim_slot.lua: a schedule's slot claimed and its task submitted in one script.
struct ClaimSlot {
  static const Script kScript;
  Submit task{};             // its KEYS first, then `claim`; its ARGV but the fields first
  std::string_view claim{};  // the schedule's claim hash
  std::int64_t slot_s = 0;   // the slot, Unix seconds
  std::string_view node{};
  std::int64_t max_lead_s = 0;  // the most seconds a slot may lead Redis's clock
  Connection::Call call() const;
};

// attempt.lua (fenced): one ended attempt recorded.
struct Attempt {
  static const Script kScript;
  std::string_view stream{};
  std::string_view entry{}, consumer{};
  std::uint64_t task_id = 0;
  std::string_view prefix{}, attempt{};  // attempt: encoded
  Connection::Call call() const;
};

// finish_batch.lua (fenced per end, with one XPENDING per band for the batch: each band's
// range, the lowest to the highest entry id of its ends, is computed here): a batch of tasks
// ended, each with its attempts in one HSET of its hash.
struct FinishBatch {
  static const Script kScript;
  static constexpr std::size_t kMaxEnds = 512;  // in one call
  std::string_view done{}, letters{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view consumer{}, prefix{};
  std::uint64_t keep_finished = 0, keep_letters = 0;
  // The ends, as runs (finish_batch.lua names their layout): a compact end (its attempts
  // before known, one attempt, no error, no reason, not dead_lettered) sends its task id, entry
  // id, result, now_ms and attempt, and what consecutive ones share (band, state, attempt
  // number) once; any other end all its fields.
  const TaskConsumer::EndWrite* ends = nullptr;
  std::size_t count = 0;
  Connection::Call call() const;
};

// trim_finished.lua: finished tasks evicted by age, then by bytes.
struct TrimFinished {
  static const Script kScript;
  std::string_view done{}, done_bytes{};
  std::string_view prefix{};
  std::int64_t oldest_kept_ms = 0;
  std::uint64_t max_bytes = 0, max_evicted = 0;
  Connection::Call call() const;
};

// await_end.lua: a waiter registered on a task's end (pushed at once when it has ended).
struct AwaitEnd {
  static const Script kScript;
  std::string_view prefix{};
  std::uint64_t task_id = 0;
  Connection::Call call() const;
};

// beat.lua: a node's heartbeat key.
struct Beat {
  static const Script kScript;
  std::string_view node_key{};
  std::string_view identity{};
  std::int64_t ttl_ms = 0;
  Connection::Call call() const;
};

// discard.lua (fenced): an entry dropped.
struct Discard {
  static const Script kScript;
  std::string_view stream{};
  std::string_view entry{}, consumer{};
  Connection::Call call() const;
};

// release.lua (fenced): a task handed back to the stream.
struct Release {
  static const Script kScript;
  std::string_view stream{}, done{};
  std::string_view entry{}, consumer{};
  std::uint64_t task_id = 0;
  std::string_view prefix{};
  std::int64_t now_ms = 0;
  Connection::Call call() const;
};

// refused.lua (fenced): a node's refusal of a task counted; the task deferred, or left for
// the caller to end `rejected` once every live node refused it.
struct Refused {
  static const Script kScript;
  std::string_view stream{}, later{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view entry{}, consumer{};
  std::uint64_t task_id = 0;
  std::string_view prefix{}, node_prefix{};
  std::int64_t now_ms = 0, pause_ms = 0;
  std::uint32_t at_least = 0;  // refusals, in all, before a task is left to end
  Connection::Call call() const;
};

// cancel.lua: a task asked to stop.
struct Cancel {
  static const Script kScript;
  std::string_view later{}, done{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view prefix{};
  std::uint64_t task_id = 0;
  std::int64_t now_ms = 0;
  Connection::Call call() const;
};

// touch.lua: the idle time of the consumer's pending entries reset.
struct Touch {
  static const Script kScript;
  std::string_view stream{};
  std::string_view consumer{};
  std::vector<std::string_view> entries{};
  Connection::Call call() const;
};

// Touches `entries` (band, entry id) of `consumer`, one touch.lua a band that has any, each in
// that band's stream of `streams` (PoolKeys' or BatchKeys', by PoolKeys::index_of). Returns
// how many were still the consumer's (task_consumer.cpp).
Result<std::size_t> touch_in_bands(Connection& c, const std::string (&streams)[3],
                                   const std::string& consumer,
                                   const std::vector<std::pair<Band, std::string>>& entries);

// retry.lua (fenced): a failed task deferred until its backoff passes, or left to be ended.
struct Retry {
  static const Script kScript;
  std::string_view stream{}, later{};
  std::string_view entry{}, consumer{};
  std::uint64_t task_id = 0;
  std::string_view prefix{};
  std::uint32_t retries = 0;
  std::int64_t now_ms = 0;
  std::int64_t base_ms = 0;
  double multiplier = 1;
  std::int64_t max_ms = 0;
  double jitter = 0;                                   // 0..1
  const std::vector<std::string>* attempts = nullptr;  // encoded; may be null
  Connection::Call call() const;
};

// move_due.lua: the due tasks of the later set back to their streams.
struct MoveDue {
  static const Script kScript;
  std::string_view later{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view done{};
  std::string_view prefix{};
  std::int64_t now_ms = 0;
  std::size_t max = 0;
  Connection::Call call() const;
};

// take.lua (fenced per entry, with one XPENDING per band for the call, as FinishBatch): the
// tasks of read or claimed entries marked running on the consumer; the surplus of a read
// handed back unread.
struct Take {
  static const Script kScript;
  struct Entry {
    std::uint64_t task_id = 0;
    std::string_view entry{};
    Band band = 0;
    std::string_view task_type{};
  };
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view prefix{}, pool{}, consumer{};
  std::vector<Entry> entries{};
  // Entries read beyond the read's count (a read over every band: the lower bands' surplus),
  // handed back unread, per band (kBands order), each band's in the order read.
  std::vector<std::string_view> back[3]{};
  Connection::Call call() const;
};

// claim_idle.lua: one page of a band's pending list scanned for a dead node's entries.
struct ClaimIdle {
  static const Script kScript;
  std::string_view stream{};
  std::string_view consumer{};
  std::int64_t min_idle_ms = 0;
  std::size_t max = 0;
  std::string_view node_prefix{}, start{};
  std::size_t page = 0;
  Connection::Call call() const;
};

// take_tokens.lua (fenced when `fence` is set): a token of each bucket and a cap's lease.
struct TakeTokens {
  static const Script kScript;
  const std::vector<TaskUpkeep::Bucket>* buckets = nullptr;
  struct CapLease {
    std::string_view key{};
    std::uint32_t max = 1;
    std::uint64_t task_id = 0;
    std::string_view prefix{};
  };
  std::optional<CapLease> cap{};
  struct Fence {
    std::string_view stream{}, entry{}, consumer{};
  };
  std::optional<Fence> fence{};
  Connection::Call call() const;
};

// throttle.lua (fenced): a task over a rate limit deferred to its bucket's next token.
struct Throttle {
  static const Script kScript;
  std::string_view stream{}, later{}, bucket{};
  std::string_view entry{}, consumer{};
  std::uint64_t task_id = 0;
  std::string_view prefix{};
  std::int64_t now_ms = 0, wait_ms = 0;
  double interval_ms = 0;
  Connection::Call call() const;
};

// letters.lua: one chunk of a replay or purge of the dead letters.
struct Letters {
  static const Script kScript;
  std::string_view letters{}, done{};
  const std::string* streams = nullptr;  // the bands' q:1, q:0, q:-1 (kBands)
  std::string_view prefix{}, pool{};
  bool replay = false;
  bool reverse = false;  // XREVRANGE from..to, else XRANGE
  std::string_view from{}, to{};
  std::size_t count = 0, max_matches = 0;  // max_matches 0: any number
  std::int64_t now_ms = 0, max_timeout_ms = 0;
  // The filter, '' matching any.
  std::string_view want_type{}, want_reason{}, want_id{}, from_ms{}, until_ms{};
  Connection::Call call() const;
};

// A script as Redis runs it: `local GROUP`, lib.lua's helpers, then `own` (a lua/ file's
// text): for the scripts of other files (batch_scripts.hpp).
Script with_lib(std::string name, std::string_view own);

// Runs a script with its arguments (EVALSHA, loaded first when needed).
template <class Args>
Result<Reply> run(Connection& c, const Args& args) {
  const Connection::Call call = args.call();
  return c.eval(Args::kScript, call.keys, call.args);
}

}  // namespace sandpool::redis::lua
