// TaskStream (task_stream.hpp): the keys of a Redis pool and the scripts that change them.
#include <sandpool/redis/task_stream.hpp>

#include "redis/reply_checks.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace sandpool::redis {
namespace {

// The fence every script of a node opens with: the entry is pending for this consumer.
// KEYS[1] is the stream, ARGV[1] the entry id, ARGV[2] the consumer.
#define SP_FENCE                                                                      \
  "local pending = redis.call('XPENDING', KEYS[1], 'sandpool', ARGV[1], ARGV[1], 1, " \
  "ARGV[2])\n"                                                                        \
  "if #pending == 0 then return 0 end\n"

// A task that stops running here (it ends, waits in the later set, or is handed back) gives
// back its lease of a type's cap (TaskStream::Cap). `h` is its hash, ARGV[3] its id.
#define SP_RELEASE_LEASE                           \
  "local lease = redis.call('HGET', h, 'lease')\n" \
  "if lease then\n"                                \
  "  redis.call('SREM', lease, ARGV[3])\n"         \
  "  redis.call('HDEL', h, 'lease')\n"             \
  "end\n"

// A task asked to cancel while a node ran it (kCancel's flag) ends `cancelled` where it
// would have gone back to the stream or the later set (kRelease, kMoveDue), so that it runs
// no more. `h` is its hash, `id` its id, `now` the time (ms), `done` the finished set.
#define SP_END_CANCELLED                                                                   \
  "redis.call('HSET', h, 'state', 'cancelled', 'error', 'cancelled before it ran again', " \
  "'reason', 'user', 'finished_ms', now)\n"                                                \
  "redis.call('HDEL', h, 'deferred')\n"                                                    \
  "redis.call('ZADD', done, now, id)\n"                                                    \
  "local ended = prefix .. 'end:' .. id\n"                                                 \
  "redis.call('RPUSH', ended, 'cancelled')\n"                                              \
  "redis.call('PEXPIRE', ended, 600000)\n"

// The body of a submit (kSubmit, kClaimSlot), after its idempotency key was looked up and
// found unused: takes an id and writes the task, leaving it in `id`. KEYS: ids, the band's
// stream, idempotency key ('' when none), later. ARGV: prefix, pool, now_ms, type,
// not_before_ms ('0': none), band; the entry's field/value pairs from ARGV[F] on. The ids
// start at TaskStream::kFirstId (2^52) unless set. A task due after now waits in the later
// set, its entry's fields packed in its hash, as a deferred retry does.
#define SP_SUBMIT_BODY                                                                      \
  "redis.call('SET', KEYS[1], '4503599627370495', 'NX')\n"                                  \
  "redis.call('INCR', KEYS[1])\n"                                                           \
  "-- As a string: Lua's numbers are doubles, and `..` writes one this large as 4.5e+15.\n" \
  "local id = redis.call('GET', KEYS[1])\n"                                                 \
  "local fields = {'id', id}\n"                                                             \
  "for i = F, #ARGV do fields[#fields + 1] = ARGV[i] end\n"                                 \
  "local h = ARGV[1] .. 'task:' .. id\n"                                                    \
  "if tonumber(ARGV[5]) > tonumber(ARGV[3]) then\n"                                         \
  "  redis.call('HSET', h, 'state', 'scheduled', 'pool', ARGV[2], 'type', ARGV[4], "        \
  "'submitted_ms',\n"                                                                       \
  "             ARGV[3], 'attempts', 0, 'band', ARGV[6], 'not_before_ms', ARGV[5], "        \
  "'deferred',\n"                                                                           \
  "             cmsgpack.pack(fields))\n"                                                   \
  "  redis.call('ZADD', KEYS[4], ARGV[5], id)\n"                                            \
  "else\n"                                                                                  \
  "  local entry = redis.call('XADD', KEYS[2], '*', unpack(fields))\n"                      \
  "  redis.call('HSET', h, 'state', 'queued', 'pool', ARGV[2], 'type', ARGV[4], "           \
  "'submitted_ms',\n"                                                                       \
  "             ARGV[3], 'entry', entry, 'attempts', 0, 'band', ARGV[6])\n"                 \
  "end\n"                                                                                   \
  "for i = 3, #fields - 1, 2 do\n"                                                          \
  "  if fields[i] == 'tenant' then redis.call('HSET', h, 'tenant', fields[i + 1]) end\n"    \
  "end\n"                                                                                   \
  "if KEYS[3] ~= '' then\n"                                                                 \
  "  redis.call('SET', KEYS[3], id)\n"                                                      \
  "  redis.call('HSET', ARGV[1] .. 'task:' .. id, 'idem_key', KEYS[3])\n"                   \
  "end\n"

// KEYS and ARGV: SP_SUBMIT_BODY's, the fields from ARGV[7]. Answers {id, 1}, or {the first
// task's id, 0} when the idempotency key names one.
const Script kSubmit{"submit",
                     "local F = 7\n"
                     R"(
if KEYS[3] ~= '' then
  local first = redis.call('GET', KEYS[3])
  if first then return {tonumber(first), 0} end
end
)" SP_SUBMIT_BODY "return {tonumber(id), 1}\n"};

// A schedule's slot (TaskStream::claim_slot): the claim and the submit in one script, so no
// crash comes between them. KEYS: SP_SUBMIT_BODY's, then the schedule's claim hash. ARGV:
// SP_SUBMIT_BODY's first six, the slot (Unix seconds), the node, the most seconds a slot may
// lead Redis's clock; the fields from ARGV[10]. Answers {task id, 1 (won) or 0 (lost), node},
// or {last task, 2, the pausing node} while the hash holds the schedule paused.
const Script kClaimSlot{"claim_slot",
                        "local F = 10\n"
                        R"(
local slot = tonumber(ARGV[7])
if slot > tonumber(redis.call('TIME')[1]) + tonumber(ARGV[9]) then
  return redis.error_reply('slot ' .. ARGV[7] .. ' is ahead of redis clock by more than ' ..
                           ARGV[9] .. ' s: the node clock runs ahead')
end
local held = redis.call('HMGET', KEYS[5], 'slot', 'task', 'node', 'paused')
if held[4] then return {tonumber(held[2]) or 0, 2, held[4]} end
if held[1] and tonumber(held[1]) and tonumber(held[1]) >= slot then
  return {tonumber(held[2]) or 0, 0, held[3] or ''}
end
if KEYS[3] ~= '' then
  local first = redis.call('GET', KEYS[3])
  if first then
    redis.call('HSET', KEYS[5], 'slot', ARGV[7], 'task', first, 'node', '')
    return {tonumber(first), 0, ''}
  end
end
)" SP_SUBMIT_BODY R"(
redis.call('HSET', KEYS[5], 'slot', ARGV[7], 'task', id, 'node', ARGV[8], 'claimed_ms', ARGV[3])
return {tonumber(id), 1, ARGV[8]}
)"};

// KEYS: stream. ARGV: entry, consumer, task id, prefix, the encoded attempt.
const Script kAttempt{"attempt", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
redis.call('RPUSH', h .. ':attempts', ARGV[5])
redis.call('HINCRBY', h, 'attempts', 1)
return 1
)"};

// KEYS: stream, done, dead letters. ARGV: entry, consumer, task id, prefix, state, result,
// error, reason, now_ms, the most finished tasks kept, the most letters kept, then the
// attempts to record first (encoded).
const Script kFinish{"finish", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
)" SP_RELEASE_LEASE R"(if #ARGV > 11 then
  redis.call('RPUSH', h .. ':attempts', unpack(ARGV, 12))
  redis.call('HINCRBY', h, 'attempts', #ARGV - 11)
end
if ARGV[5] == 'dead_lettered' then
  local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
  local letter = {'MAXLEN', '~', ARGV[11], '*'}
  if e[1] then for _, v in ipairs(e[1][2]) do letter[#letter + 1] = v end end
  for _, v in ipairs({'reason', ARGV[8], 'error', ARGV[7], 'dead_lettered_ms', ARGV[9],
                      'attempts', redis.call('HGET', h, 'attempts') or '0'}) do
    letter[#letter + 1] = v
  end
  redis.call('XADD', KEYS[3], unpack(letter))
end
local bytes = #ARGV[6] + #ARGV[7]
redis.call('HSET', h, 'state', ARGV[5], 'result', ARGV[6], 'error', ARGV[7], 'reason', ARGV[8],
           'finished_ms', ARGV[9], 'node', ARGV[2], 'bytes', bytes)
redis.call('INCRBY', KEYS[2] .. ':bytes', bytes)
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[9], ARGV[3])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[10])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #popped, 2 do
    local old = ARGV[4] .. 'task:' .. popped[i]
    local idem = redis.call('HGET', old, 'idem_key')
    if idem then redis.call('DEL', idem) end
    redis.call('DECRBY', KEYS[2] .. ':bytes', tonumber(redis.call('HGET', old, 'bytes') or '0'))
    redis.call('DEL', old, old .. ':attempts')
  end
end
local ended = ARGV[4] .. 'end:' .. ARGV[3]
redis.call('RPUSH', ended, ARGV[5])
redis.call('PEXPIRE', ended, 600000)
return 1
)"};

// KEYS: done, done's byte count. ARGV: prefix, the oldest finished_ms kept, the most bytes
// kept, the most evicted in one call. Evicts the finished tasks older than the age bound, then
// the oldest while the bytes are over.
const Script kTrim{"trim_finished", R"(
local budget = tonumber(ARGV[4])
local function evict(id)
  local h = ARGV[1] .. 'task:' .. id
  local idem = redis.call('HGET', h, 'idem_key')
  if idem then redis.call('DEL', idem) end
  redis.call('DECRBY', KEYS[2], tonumber(redis.call('HGET', h, 'bytes') or '0'))
  redis.call('DEL', h, h .. ':attempts')
  redis.call('ZREM', KEYS[1], id)
  budget = budget - 1
end
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, budget)
for _, id in ipairs(old) do evict(id) end
while budget > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') > tonumber(ARGV[3]) do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if not oldest[1] then break end
  evict(oldest[1])
end
return tonumber(ARGV[4]) - budget
)"};

// KEYS: the node's key. ARGV: identity, ttl in ms.
const Script kBeat{"beat", R"(
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
)"};

// KEYS: stream. ARGV: entry, consumer.
const Script kDiscard{"discard", SP_FENCE R"(
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
)"};

// KEYS: stream, done. ARGV: entry, consumer, task id, prefix, now_ms. The entry goes back to
// the stream as a new one (same fields), for any node to read; the task's hash is queued
// again. A task asked to cancel ends `cancelled` instead.
const Script kRelease{"release", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
)" SP_RELEASE_LEASE R"(
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('HGET', h, 'cancel') == '1' then
  local id, now, done, prefix = ARGV[3], ARGV[5], KEYS[2], ARGV[4]
)" SP_END_CANCELLED R"(
  return 1
end
if not e[1] then return 1 end
local entry = redis.call('XADD', KEYS[1], '*', unpack(e[1][2]))
redis.call('HSET', ARGV[4] .. 'task:' .. ARGV[3], 'state', 'queued', 'entry', entry)
return 1
)"};

// KEYS: stream. ARGV: entry, consumer, task id, prefix. Counts a node's refusal of the task
// in its hash; answers the count (0: not this consumer's entry).
const Script kRefused{"refused", SP_FENCE R"(
return redis.call('HINCRBY', ARGV[4] .. 'task:' .. ARGV[3], 'refusals', 1)
)"};

// KEYS: later, done, the streams q:1, q:0, q:-1. ARGV: prefix, task id, now_ms. Answers
// {code, state}: -1 no such task; 0 already ended; 1 cancelled here (queued and not read,
// waiting out a backoff, or scheduled), or flagged for the node that runs it (state as it is).
const Script kCancel{"cancel", R"(
local h = ARGV[1] .. 'task:' .. ARGV[2]
local state = redis.call('HGET', h, 'state')
if not state then return {-1, ''} end
if state == 'completed' or state == 'dead_lettered' or state == 'cancelled' then
  return {0, state}
end
local entry = redis.call('HGET', h, 'entry')
local unread = false
if redis.call('ZREM', KEYS[1], ARGV[2]) == 1 then  -- a backoff, scheduled, or over a rate limit
  unread = true
elseif entry then
  local stream = KEYS[4 - tonumber(redis.call('HGET', h, 'band') or '0')]
  local pending = redis.call('XPENDING', stream, 'sandpool', entry, entry, 1)
  unread = #pending == 0 and redis.call('XDEL', stream, entry) == 1
end
if not unread then
  redis.call('HSET', h, 'cancel', '1')
  return {1, state}
end
redis.call('HSET', h, 'state', 'cancelled', 'error', 'cancelled before it ran', 'reason', 'user',
           'finished_ms', ARGV[3])
redis.call('HDEL', h, 'deferred')
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
local ended = ARGV[1] .. 'end:' .. ARGV[2]
redis.call('RPUSH', ended, 'cancelled')
redis.call('PEXPIRE', ended, 600000)
return {1, 'cancelled'}
)"};

// KEYS: stream. ARGV: consumer, then entry ids. Touches those still pending for it.
const Script kTouch{"touch", R"(
local touched = 0
for i = 2, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], 'sandpool', ARGV[i], ARGV[i], 1, ARGV[1])
  if #p == 1 then
    redis.call('XCLAIM', KEYS[1], 'sandpool', ARGV[1], 0, ARGV[i], 'JUSTID')
    touched = touched + 1
  end
end
return touched
)"};

// KEYS: stream, later. ARGV: entry, consumer, task id, prefix, due_ms.
const Script kDefer{"defer", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
)" SP_RELEASE_LEASE R"(
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
redis.call('HSET', h, 'state', 'retry_wait', 'deferred', cmsgpack.pack(e[1][2]))
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
)"};

// KEYS: stream, later. ARGV: entry, consumer, task id, prefix, retries, now_ms, base_ms,
// multiplier, max_ms, jitter (0..1), then the ended attempts (encoded). While the task has
// retries left after them (its attempts on every node at most 1 + retries), records them and
// defers it until its backoff passes (full jitter over base x multiplier^(n-1), at most max,
// n its attempts so far), as kDefer does, and answers 2. Else it writes nothing and answers 1:
// the caller ends it, attempts and all (so a call sent again changes nothing twice).
const Script kRetry{"retry", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
if redis.call('HGET', h, 'cancel') == '1' then return 3 end
local n = tonumber(redis.call('HGET', h, 'attempts') or '0') + (#ARGV - 10)
if n > tonumber(ARGV[5]) then return 1 end
)" SP_RELEASE_LEASE R"(
if #ARGV > 10 then
  redis.call('RPUSH', h .. ':attempts', unpack(ARGV, 11))
  redis.call('HINCRBY', h, 'attempts', #ARGV - 10)
end
local ceiling = math.min(tonumber(ARGV[9]), tonumber(ARGV[7]) * tonumber(ARGV[8]) ^ (n - 1))
local due = tonumber(ARGV[6]) + math.floor(tonumber(ARGV[10]) * ceiling)
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
redis.call('HSET', h, 'state', 'retry_wait', 'deferred', cmsgpack.pack(e[1][2]))
redis.call('ZADD', KEYS[2], due, ARGV[3])
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 2
)"};

// KEYS: later, the streams q:1, q:0, q:-1, done. ARGV: prefix, now_ms, max. Each due task's
// entry goes to its band's stream; one asked to cancel (while a node ran it) ends `cancelled`.
const Script kMoveDue{"move_due", R"(
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local now, done, prefix = ARGV[2], KEYS[5], ARGV[1]
for _, id in ipairs(ids) do
  local h = ARGV[1] .. 'task:' .. id
  local packed = redis.call('HGET', h, 'deferred')
  if packed and redis.call('HGET', h, 'cancel') == '1' then
)" SP_END_CANCELLED R"(
  elseif packed then
    local stream = KEYS[3 - tonumber(redis.call('HGET', h, 'band') or '0')]
    local entry = redis.call('XADD', stream, '*', unpack(cmsgpack.unpack(packed)))
    redis.call('HSET', h, 'state', 'queued', 'entry', entry)
    redis.call('HDEL', h, 'deferred')
  end
  redis.call('ZREM', KEYS[1], id)
end
return #ids
)"};

// KEYS: the streams q:1, q:0, q:-1. ARGV: consumer, count. Reads new entries for the consumer,
// the higher bands first, at most `count` in all; answers {band's index in KEYS, entries}
// for each band that gave some.
const Script kRead{"read", R"(
local left = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  if left <= 0 then break end
  local r = redis.call('XREADGROUP', 'GROUP', 'sandpool', ARGV[1], 'COUNT', left, 'STREAMS',
                       KEYS[i], '>')
  if r then
    out[#out + 1] = {i, r[1][2]}
    left = left - #r[1][2]
  end
end
return out
)"};

// KEYS: the streams q:1, q:0, q:-1. ARGV: prefix, pool, consumer, then per entry: task id,
// entry id, band, type. Fenced per entry: one no longer pending for the consumer (a node that
// stalled between its read and this, and another claimed the entry meanwhile, and may have
// ended it) is left alone and answers -1. Each other task's hash says it runs on the consumer
// (a plain XADD's task gets its hash, submitted when its entry was added); answers each
// task's attempts so far.
const Script kTake{"take", R"(
local out = {}
for i = 4, #ARGV, 4 do
  local stream = KEYS[2 - tonumber(ARGV[i + 2])]
  local h = ARGV[1] .. 'task:' .. ARGV[i]
  if #redis.call('XPENDING', stream, 'sandpool', ARGV[i + 1], ARGV[i + 1], 1, ARGV[3]) == 0 then
    out[#out + 1] = -1
  else
    if redis.call('EXISTS', h) == 0 then
      redis.call('HSET', h, 'pool', ARGV[2], 'type', ARGV[i + 3], 'attempts', 0, 'submitted_ms',
                 string.match(ARGV[i + 1], '^(%d+)') or '0')
    end
    redis.call('HSET', h, 'state', 'running', 'node', ARGV[3], 'entry', ARGV[i + 1], 'band',
               ARGV[i + 2])
    out[#out + 1] = tonumber(redis.call('HGET', h, 'attempts') or '0')
  end
end
return out
)"};

// KEYS: a band's stream. ARGV: consumer, min idle (ms), the most to claim, the node keys'
// prefix (P:node:), where the scan starts (an entry id, "(" before it: after it), how many
// pending entries to look at. Claims the pending entries idle for min idle or more whose
// consumer's heartbeat key is gone (a dead node's), or that are the claimant's own (a live
// node touches what it holds every beat: its own idle ones are a previous run's), at most
// the most. Answers {the last entry id looked at ('' when none), the claimed entries}.
const Script kClaimIdle{"claim_idle", R"(
local looked = redis.call('XPENDING', KEYS[1], 'sandpool', 'IDLE', tonumber(ARGV[2]), ARGV[5],
                          '+', tonumber(ARGV[6]))
local dead, claimed, last = {}, {}, ''
for _, p in ipairs(looked) do
  if #claimed >= tonumber(ARGV[3]) then break end
  last = p[1]
  local owner = p[2]
  if dead[owner] == nil then
    dead[owner] = owner == ARGV[1] or redis.call('EXISTS', ARGV[4] .. owner) == 0
  end
  if dead[owner] then
    for _, e in ipairs(redis.call('XCLAIM', KEYS[1], 'sandpool', ARGV[1], ARGV[2], p[1])) do
      if e then claimed[#claimed + 1] = e end
    end
  end
end
return {last, claimed}
)"};

#undef SP_FENCE
#undef SP_RELEASE_LEASE
#undef SP_END_CANCELLED

// A fenced script's answer: 1 done, 0 refused.
Result<Fenced> fenced(const char* what, Result<Reply> r) {
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected(what, *r);
  return r->integer == 1 ? Fenced::kDone : Fenced::kNotYours;
}

// An entry's fields into a StreamEntry; false when a field is malformed.
bool to_entry(const Reply& entry, StreamEntry* out) {
  if (entry.elements.size() != 2) return false;
  out->entry_id = entry.elements[0].str;
  const auto& f = entry.elements[1].elements;
  bool has_id = false;
  for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i].str;
    const std::string& v = f[i + 1].str;
    if (k == "id") {
      has_id = parse_number(v, &out->task_id);
      if (!has_id) return false;
    } else if (k == "type") {
      out->task.type = v;
    } else if (k == "payload") {
      out->task.payload = v;
    } else if (k == "priority") {
      if (!parse_number(v, &out->task.priority)) return false;
    } else if (k == "timeout_ms") {
      std::int64_t ms = 0;
      if (!parse_number(v, &ms)) return false;
      out->task.timeout_ms = ms;
    } else if (k == "retries") {
      std::uint32_t n = 0;
      if (!parse_number(v, &n)) return false;
      out->task.retries = n;
    } else if (k == "key") {
      out->task.key = v;
    } else if (k == "idem") {
      out->task.idempotency_key = v;
    } else if (k == "tenant") {
      out->task.tenant = v;
    }  // fields of later versions are left for them
  }
  return has_id && !out->task.type.empty();
}

}  // namespace

TaskStream::TaskStream(std::string prefix, std::string pool, std::uint64_t max_finished,
                       std::uint64_t max_letters)
    : max_finished_(max_finished),
      max_letters_(max_letters),
      prefix_(std::move(prefix)),
      pool_(std::move(pool)),
      later_(prefix_ + pool_ + ":later"),
      done_(prefix_ + pool_ + ":done"),
      done_bytes_(done_ + ":bytes"),
      letters_(prefix_ + pool_ + ":dlq") {
  for (const Band b : kBands) streams_[index_of(b)] = prefix_ + pool_ + ":q:" + std::to_string(b);
}

TaskStream::TaskStream(std::string prefix, std::string pool, const Limits& limits)
    : TaskStream(std::move(prefix), std::move(pool), limits.finished, limits.letters) {
  finished_max_age_ms_ = limits.finished_max_age_ms;
  finished_max_bytes_ = limits.finished_max_bytes;
}

Status TaskStream::ensure_group(Connection& c) const {
  for (const std::string& stream : streams_) {
    auto r = c.command({"XGROUP", "CREATE", stream, kGroup, "0", "MKSTREAM"});
    if (!r) return r.status();
    if (r->is_error() && r->str.rfind("BUSYGROUP", 0) != 0) return r->status();
  }
  auto ids = c.command({"SET", prefix_ + "ids", std::to_string(kFirstId - 1), "NX"});
  if (!ids) return ids.status();
  return ids->status();
}

static_assert(TaskStream::kFirstId - 1 == 4503599627370495ULL, "the submit script's id base");

Connection::Call TaskStream::submit_call(const StreamTask& t, std::int64_t now_ms) const {
  Connection::Call call;
  const Band band = band_of(t.priority);
  call.args = {prefix_,
               pool_,
               std::to_string(now_ms),
               t.type,
               std::to_string(t.not_before_ms.value_or(0)),
               std::to_string(band),
               "type",
               t.type,
               "payload",
               t.payload};
  auto& args = call.args;
  if (t.priority != 0) args.insert(args.end(), {"priority", std::to_string(t.priority)});
  if (t.timeout_ms) args.insert(args.end(), {"timeout_ms", std::to_string(*t.timeout_ms)});
  if (t.retries) args.insert(args.end(), {"retries", std::to_string(*t.retries)});
  if (!t.key.empty()) args.insert(args.end(), {"key", t.key});
  if (!t.idempotency_key.empty()) args.insert(args.end(), {"idem", t.idempotency_key});
  if (!t.tenant.empty()) args.insert(args.end(), {"tenant", t.tenant});
  const std::string idem = t.idempotency_key.empty() ? "" : prefix_ + "idem:" + t.idempotency_key;
  call.keys = {prefix_ + "ids", stream_key(band), idem, later_};
  return call;
}

namespace {
Result<std::uint64_t> submitted_id(const Reply& r) {
  if (r.is_error()) return r.status();
  if (r.elements.size() != 2 || r.elements[0].type != Reply::Type::kInteger) {
    return unexpected("submit", r);
  }
  return static_cast<std::uint64_t>(r.elements[0].integer);
}

// A submit sent whose reply was lost: it may have run (Redis stalled past the reply timeout,
// or the connection broke after the send).
// Code::kTimeout, the wait for the reply ran out (or broke), with "outcome unknown" said.
Status outcome_lost(const Status& why) {
  if (why.code() != Code::kUnavailable) return why;
  return Status::error(Code::kTimeout, "outcome unknown: " + why.message() +
                                           ": the submit was sent and its reply lost, so it " +
                                           "may have been accepted");
}
}  // namespace

Result<std::uint64_t> TaskStream::submit(Connection& c, const StreamTask& t,
                                         std::int64_t now_ms) const {
  const Connection::Call call = submit_call(t, now_ms);
  // Loaded first, so that a failure below means the script was sent.
  if (auto sha = c.load(kSubmit); !sha) return sha.status();
  auto r = c.eval(kSubmit, call.keys, call.args);
  if (!r) return c.broke_writing() ? r.status() : outcome_lost(r.status());  // not sent: none
  return submitted_id(*r);
}

Result<TaskStream::SlotClaim> TaskStream::claim_slot(Connection& c, const StreamTask& t,
                                                     const std::string& schedule,
                                                     std::int64_t slot_s, const std::string& node,
                                                     std::int64_t now_ms) const {
  Connection::Call call = submit_call(t, now_ms);
  call.keys.push_back(schedule_claim_key(schedule));
  const std::vector<std::string> claim = {std::to_string(slot_s), node,
                                          std::to_string(kMaxSlotLeadSeconds)};
  call.args.insert(call.args.begin() + 6, claim.begin(), claim.end());
  auto r = c.eval(kClaimSlot, call.keys, call.args);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 3 || r->elements[0].type != Reply::Type::kInteger ||
      r->elements[1].type != Reply::Type::kInteger || r->elements[2].type != Reply::Type::kString) {
    return unexpected("claim_slot", *r);
  }
  SlotClaim out;
  out.task_id = static_cast<std::uint64_t>(r->elements[0].integer);
  out.won = r->elements[1].integer == 1;
  out.paused = r->elements[1].integer == 2;
  out.node = r->elements[2].str;
  return out;
}

Status TaskStream::set_schedule_paused(Connection& c, const std::string& schedule, bool paused,
                                       const std::string& node, std::int64_t now_ms) const {
  const std::string key = schedule_claim_key(schedule);
  auto r = paused ? c.command({"HSET", key, "paused", node, "paused_ms", std::to_string(now_ms)})
                  : c.command({"HDEL", key, "paused", "paused_ms"});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  return Status::ok();
}

std::string TaskStream::schedule_claim_key(const std::string& schedule) const {
  return prefix_ + "schedule:" + schedule;
}

Result<std::vector<Result<std::uint64_t>>> TaskStream::submit_many(
    Connection& c, const std::vector<StreamTask>& tasks, std::int64_t now_ms) const {
  // Not eval_many(): the replies read before a break are ids the submitter must get, and
  // the tasks whose replies were lost are unknown, not refused.
  auto sha = c.load(kSubmit);
  if (!sha) return sha.status();  // nothing sent
  std::vector<Result<std::uint64_t>> out;
  out.reserve(tasks.size());
  for (const StreamTask& t : tasks) {
    const Connection::Call call = submit_call(t, now_ms);
    std::vector<std::string> argv = {"EVALSHA", *sha, std::to_string(call.keys.size())};
    argv.insert(argv.end(), call.keys.begin(), call.keys.end());
    argv.insert(argv.end(), call.args.begin(), call.args.end());
    if (Status s = c.append(argv); !s) return s;  // nothing sent yet: the buffer goes out on read
  }
  std::vector<std::size_t> lost_script;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    auto r = c.read();
    if (!r) {
      for (; i < tasks.size(); ++i) out.push_back(outcome_lost(r.status()));
      return out;
    }
    // The server lost the script since it was loaded (a restart): that one did not run.
    if (r->is_error() && r->str.rfind("NOSCRIPT", 0) == 0) lost_script.push_back(i);
    out.push_back(submitted_id(*r));
  }
  for (const std::size_t i : lost_script) {  // once every reply of the pipeline is read
    const Connection::Call call = submit_call(tasks[i], now_ms);
    auto again = c.eval(kSubmit, call.keys, call.args);
    out[i] = again ? submitted_id(*again) : outcome_lost(again.status());
  }
  return out;
}

Result<std::vector<StreamEntry>> TaskStream::read(Connection& c, const std::string& consumer,
                                                  std::size_t count,
                                                  std::chrono::milliseconds block) const {
  std::vector<StreamEntry> out;
  if (count == 0) return out;
  const std::vector<std::string> keys(std::begin(streams_), std::end(streams_));
  auto r = c.eval(kRead, keys, {consumer, std::to_string(count)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  for (const Reply& band : r->elements) {  // {index in kBands + 1, entries}
    if (band.elements.size() != 2 || band.elements[0].integer < 1 || band.elements[0].integer > 3) {
      return unexpected("read", *r);
    }
    const Band b = kBands[band.elements[0].integer - 1];
    for (const Reply& entry : band.elements[1].elements) {
      out.push_back(parse_entry(entry, b));
      out.back().deliveries = 1;
    }
  }
  if (!out.empty() || block.count() <= 0) return out;
  // Nothing waits: block on every band for the first entry to come (one of each at most).
  std::vector<std::string> args = {"XREADGROUP", "GROUP", kGroup,  consumer,
                                   "COUNT",      "1",     "BLOCK", std::to_string(block.count()),
                                   "STREAMS"};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), keys.size(), ">");
  auto w = c.command(args);
  if (!w) return w.status();
  if (w->is_error()) return w->status();
  if (w->is_nil()) return out;   // nothing within `block`
  for (const Band b : kBands) {  // the reply's streams in band order
    for (const Reply& stream : w->elements) {
      if (stream.elements.size() != 2) return unexpected("XREADGROUP", *w);
      if (stream.elements[0].str != stream_key(b)) continue;
      for (const Reply& entry : stream.elements[1].elements) {
        out.push_back(parse_entry(entry, b));
        out.back().deliveries = 1;
      }
    }
  }
  return out;
}

StreamEntry TaskStream::parse_entry(const Reply& entry, Band band) const {
  StreamEntry e;
  e.band = band;
  if (!to_entry(entry, &e)) {
    e.malformed = "entry " + (entry.elements.empty() ? std::string("?") : entry.elements[0].str) +
                  " of " + stream_key(band) + " has no valid id or type, or a malformed option";
  }
  return e;
}

Result<std::optional<std::string>> TaskStream::beat(Connection& c, const std::string& prefix,
                                                    const std::string& name,
                                                    const std::string& identity,
                                                    std::chrono::milliseconds ttl) {
  auto r = c.eval(kBeat, {prefix + "node:" + name}, {identity, std::to_string(ttl.count())});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type == Reply::Type::kInteger) return std::optional<std::string>();
  return std::optional<std::string>(r->str);
}

Result<Fenced> TaskStream::discard(Connection& c, const StreamEntry& e,
                                   const std::string& consumer) const {
  return fenced("discard", c.eval(kDiscard, {stream_of(e)}, {e.entry_id, consumer}));
}

Result<Fenced> TaskStream::record_attempt(Connection& c, const StreamEntry& e,
                                          const std::string& consumer,
                                          const std::string& attempt) const {
  return fenced("attempt",
                c.eval(kAttempt, {stream_of(e)},
                       {e.entry_id, consumer, std::to_string(e.task_id), prefix_, attempt}));
}

Result<Fenced> TaskStream::finish(Connection& c, const StreamEntry& e, const std::string& consumer,
                                  const std::string& state, const std::string& result,
                                  const std::string& error, const std::string& reason,
                                  std::int64_t now_ms) const {
  return fenced("finish", c.eval(kFinish, {stream_of(e), done_, letters_},
                                 {e.entry_id, consumer, std::to_string(e.task_id), prefix_, state,
                                  result, error, reason, std::to_string(now_ms),
                                  std::to_string(max_finished_), std::to_string(max_letters_)}));
}

Result<std::vector<Fenced>> TaskStream::end_all(Connection& c, const std::string& consumer,
                                                const std::vector<EndWrite>& ends) const {
  std::vector<Connection::Call> calls;
  calls.reserve(ends.size());
  for (const EndWrite& e : ends) {
    Connection::Call& call = calls.emplace_back();
    call.keys = {stream_of(*e.entry), done_, letters_};
    call.args = {e.entry->entry_id,
                 consumer,
                 std::to_string(e.entry->task_id),
                 prefix_,
                 e.state,
                 e.result,
                 e.error,
                 e.reason,
                 std::to_string(e.now_ms),
                 std::to_string(max_finished_),
                 std::to_string(max_letters_)};
    call.args.insert(call.args.end(), e.attempts.begin(), e.attempts.end());
  }
  auto replies = c.eval_many(kFinish, calls);
  if (!replies) return replies.status();
  std::vector<Fenced> out;
  out.reserve(replies->size());
  for (Reply& r : *replies) {
    auto one = fenced("finish", std::move(r));
    if (!one) return one.status();
    out.push_back(*one);
  }
  return out;
}

Result<Fenced> TaskStream::defer(Connection& c, const StreamEntry& e, const std::string& consumer,
                                 std::int64_t due_ms) const {
  return fenced("defer", c.eval(kDefer, {stream_of(e), later_},
                                {e.entry_id, consumer, std::to_string(e.task_id), prefix_,
                                 std::to_string(due_ms)}));
}

Result<Fenced> TaskStream::release(Connection& c, const StreamEntry& e,
                                   const std::string& consumer) const {
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  return fenced("release", c.eval(kRelease, {stream_of(e), done_},
                                  {e.entry_id, consumer, std::to_string(e.task_id), prefix_,
                                   std::to_string(now_ms)}));
}

Result<std::uint32_t> TaskStream::refused(Connection& c, const StreamEntry& e,
                                          const std::string& consumer) const {
  auto r =
      c.eval(kRefused, {stream_of(e)}, {e.entry_id, consumer, std::to_string(e.task_id), prefix_});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger || r->integer < 0) return unexpected("refused", *r);
  return static_cast<std::uint32_t>(r->integer);
}

Status TaskStream::take(Connection& c, const std::string& consumer,
                        std::vector<StreamEntry>& entries) const {
  std::vector<std::string> args = {prefix_, pool_, consumer};
  for (const StreamEntry& e : entries) {
    if (!e.malformed.empty()) continue;
    args.insert(args.end(),
                {std::to_string(e.task_id), e.entry_id, std::to_string(e.band), e.task.type});
  }
  if (args.size() == 3) return Status::ok();
  auto r = c.eval(kTake, {streams_[0], streams_[1], streams_[2]}, args);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  std::size_t next = 0;
  std::vector<bool> gone(entries.size(), false);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    StreamEntry& e = entries[i];
    if (!e.malformed.empty()) continue;
    if (next >= r->elements.size()) return unexpected("take", *r);
    const std::int64_t attempts = r->elements[next++].integer;
    gone[i] = attempts < 0;
    e.attempts = static_cast<std::uint32_t>(std::max<std::int64_t>(0, attempts));
  }
  std::size_t i = 0;
  std::erase_if(entries, [&](const StreamEntry&) { return gone[i++]; });
  return Status::ok();
}

Result<TaskStream::Cancelled> TaskStream::cancel(Connection& c, std::uint64_t id,
                                                 std::int64_t now_ms) const {
  auto r = c.eval(kCancel, {later_, done_, streams_[0], streams_[1], streams_[2]},
                  {prefix_, std::to_string(id), std::to_string(now_ms)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 2 || r->elements[0].type != Reply::Type::kInteger) {
    return unexpected("cancel", *r);
  }
  if (r->elements[0].integer < 0) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  return Cancelled{r->elements[0].integer == 1, r->elements[1].str};
}

Result<std::vector<bool>> TaskStream::cancel_asked(Connection& c,
                                                   const std::vector<std::uint64_t>& ids) const {
  for (const std::uint64_t id : ids) {
    SP_RETURN_IF_ERROR(c.append({"HGET", prefix_ + "task:" + std::to_string(id), "cancel"}));
  }
  std::vector<bool> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto r = c.read();
    if (!r) return r.status();
    out.push_back(r->str == "1");
  }
  return out;
}

Result<TaskStream::Retried> TaskStream::retry(Connection& c, const StreamEntry& e,
                                              const std::string& consumer,
                                              const std::vector<std::string>& attempts,
                                              std::uint32_t retries, const Backoff& backoff,
                                              std::int64_t now_ms) const {
  std::vector<std::string> args = {e.entry_id,
                                   consumer,
                                   std::to_string(e.task_id),
                                   prefix_,
                                   std::to_string(retries),
                                   std::to_string(now_ms),
                                   std::to_string(backoff.base_ms),
                                   std::to_string(backoff.multiplier),
                                   std::to_string(backoff.max_ms),
                                   std::to_string(backoff.jitter)};
  args.insert(args.end(), attempts.begin(), attempts.end());
  auto r = c.eval(kRetry, {stream_of(e), later_}, args);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("retry", *r);
  return r->integer == 3   ? Retried::kCancelled
         : r->integer == 2 ? Retried::kDeferred
         : r->integer == 1 ? Retried::kExhausted
                           : Retried::kNotYours;
}

Result<std::size_t> TaskStream::move_due(Connection& c, std::int64_t now_ms,
                                         std::size_t max) const {
  auto r = c.eval(kMoveDue, {later_, streams_[0], streams_[1], streams_[2], done_},
                  {prefix_, std::to_string(now_ms), std::to_string(max)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("move_due", *r);
  return static_cast<std::size_t>(r->integer);
}

Result<std::size_t> TaskStream::trim_finished(Connection& c, std::int64_t now_ms,
                                              std::size_t max) const {
  auto r = c.eval(kTrim, {done_, done_bytes_},
                  {prefix_, std::to_string(now_ms - finished_max_age_ms_),
                   std::to_string(finished_max_bytes_), std::to_string(max)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("trim_finished", *r);
  return static_cast<std::size_t>(r->integer);
}

Result<std::size_t> TaskStream::touch(
    Connection& c, const std::string& consumer,
    const std::vector<std::pair<Band, std::string>>& entries) const {
  std::size_t touched = 0;
  for (const Band b : kBands) {
    std::vector<std::string> args = {consumer};
    for (const auto& [band, id] : entries) {
      if (band == b) args.push_back(id);
    }
    if (args.size() == 1) continue;
    auto r = c.eval(kTouch, {stream_key(b)}, args);
    if (!r) return r.status();
    if (r->is_error()) return r->status();
    if (r->type != Reply::Type::kInteger) return unexpected("touch", *r);
    touched += static_cast<std::size_t>(r->integer);
  }
  return touched;
}

Result<std::vector<StreamEntry>> TaskStream::claim_idle(Connection& c, const std::string& consumer,
                                                        std::chrono::milliseconds min_idle,
                                                        std::size_t max) const {
  // Not XAUTOCLAIM, which takes whatever is idle: an entry is claimed only when its node's
  // heartbeat key is gone too (a script per page of the pending list, looping over it).
  constexpr std::size_t kPage = 256;
  std::vector<StreamEntry> out;
  for (const Band b : kBands) {
    std::string start = "-";
    while (out.size() < max) {
      auto r = c.eval(kClaimIdle, {stream_key(b)},
                      {consumer, std::to_string(min_idle.count()), std::to_string(max - out.size()),
                       prefix_ + "node:", start, std::to_string(kPage)});
      if (!r) return r.status();
      if (r->is_error()) return r->status();
      if (r->elements.size() != 2) return unexpected("claim_idle", *r);
      for (const Reply& entry : r->elements[1].elements) {
        if (entry.elements.size() == 2) out.push_back(parse_entry(entry, b));
      }
      const std::string& last = r->elements[0].str;
      if (last.empty() || out.size() >= max) break;  // the pending list was scanned, or enough
      start = "(" + last;
    }
  }
  // Their delivery counts, the claim included.
  for (const StreamEntry& e : out) {
    SP_RETURN_IF_ERROR(c.append({"XPENDING", stream_of(e), kGroup, e.entry_id, e.entry_id, "1"}));
  }
  for (StreamEntry& e : out) {
    auto p = c.read();
    if (!p) return p.status();
    if (p->elements.size() == 1 && p->elements[0].elements.size() == 4) {
      e.deliveries = static_cast<std::uint64_t>(p->elements[0].elements[3].integer);
    }
  }
  return out;
}

Result<std::vector<TaskStream::Letter>> TaskStream::dead_letters(Connection& c, std::size_t max,
                                                                 const std::string& before) const {
  auto r = c.command({"XREVRANGE", letters_, before.empty() ? "+" : "(" + before, "-", "COUNT",
                      std::to_string(max)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  std::vector<Letter> out;
  for (const Reply& entry : r->elements) {
    if (entry.elements.size() != 2) return unexpected("XREVRANGE", *r);
    out.emplace_back().entry_id = entry.elements[0].str;
    auto& fields = out.back().fields;
    const auto& f = entry.elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) fields.emplace_back(f[i].str, f[i + 1].str);
  }
  return out;
}

Result<std::optional<std::string>> TaskStream::task_state(Connection& c, std::uint64_t id) const {
  auto r = c.command({"HGET", prefix_ + "task:" + std::to_string(id), "state"});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->is_nil()) return std::optional<std::string>{};
  if (r->type != Reply::Type::kString) return unexpected("task_state", *r);
  return std::optional<std::string>(r->str);
}

Result<StoredTask> TaskStream::task(Connection& c, std::uint64_t id) const {
  const std::string h = prefix_ + "task:" + std::to_string(id);
  auto all = c.command({"HGETALL", h});
  if (!all) return all.status();
  if (all->is_error()) return all->status();
  if (all->elements.empty()) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  StoredTask t;
  t.id = id;
  const auto& f = all->elements;
  for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i].str;
    const std::string& v = f[i + 1].str;
    if (k == "pool")
      t.pool = v;
    else if (k == "type")
      t.type = v;
    else if (k == "state")
      t.state = v;
    else if (k == "result")
      t.result = v;
    else if (k == "error")
      t.error = v;
    else if (k == "reason")
      t.reason = v;
    else if (k == "node")
      t.node = v;
    else if (k == "entry")
      t.entry_id = v;
    else if (k == "attempts")
      (void)parse_number(v, &t.attempts);
    else if (k == "submitted_ms")
      (void)parse_number(v, &t.submitted_ms);
    else if (k == "finished_ms")
      (void)parse_number(v, &t.finished_ms);
    else if (k == "not_before_ms")
      (void)parse_number(v, &t.not_before_ms);
    else if (k == "tenant")
      t.tenant = v;
  }
  auto history = c.command({"LRANGE", h + ":attempts", "0", "-1"});
  if (!history) return history.status();
  for (const Reply& a : history->elements) t.history.push_back(a.str);
  return t;
}

Result<TaskStream::Summary> TaskStream::summary(Connection& c) const {
  std::vector<std::vector<std::string>> asks = {
      {"ZCARD", later_}, {"ZCARD", done_}, {"XLEN", letters_}};
  for (const std::string& stream : streams_) {
    asks.push_back({"XLEN", stream});
    asks.push_back({"XPENDING", stream, kGroup});
    asks.push_back({"XINFO", "CONSUMERS", stream, kGroup});
  }
  for (const auto& a : asks) SP_RETURN_IF_ERROR(c.append(a));
  std::vector<Reply> r;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    auto one = c.read();
    if (!one) return one.status();
    r.push_back(std::move(one).value());
  }
  const auto count = [](const Reply& x) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, x.integer));
  };
  Summary out;
  out.later = count(r[0]);
  out.finished = count(r[1]);
  out.dead_letters = count(r[2]);
  for (std::size_t s = 3; s + 2 < r.size(); s += 3) {  // each band: length, pending, consumers
    out.length += count(r[s]);
    if (!r[s + 1].elements.empty()) out.pending += count(r[s + 1].elements[0]);
    for (const Reply& consumer : r[s + 2].elements) {  // an error (no group yet): none
      Consumer seen;
      const auto& f = consumer.elements;
      for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
        if (f[i].str == "name") seen.name = f[i + 1].str;
        if (f[i].str == "pending") seen.pending = count(f[i + 1]);
        if (f[i].str == "idle") seen.idle_ms = f[i + 1].integer;
      }
      auto same = std::find_if(out.consumers.begin(), out.consumers.end(),
                               [&](const Consumer& x) { return x.name == seen.name; });
      if (same == out.consumers.end()) {
        out.consumers.push_back(std::move(seen));
      } else {
        same->pending += seen.pending;
        same->idle_ms = std::min(same->idle_ms, seen.idle_ms);
      }
    }
  }
  for (const Consumer& one : out.consumers) {
    SP_RETURN_IF_ERROR(c.append({"EXISTS", prefix_ + "node:" + one.name}));
  }
  for (Consumer& one : out.consumers) {
    auto alive = c.read();
    if (!alive) return alive.status();
    one.alive = alive->integer == 1;
  }
  return out;
}

}  // namespace sandpool::redis
