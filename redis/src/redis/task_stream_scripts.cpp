// The Lua scripts that change a Redis pool's keys (task_stream_scripts.hpp), each with its
// KEYS, ARGV and answer. TaskStream (task_stream.cpp) builds their arguments and reads their
// answers.
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis::lua {

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
// in its hash, once per entry and node (`refused_by`: the same refusal sent again after a
// lost reply is not counted twice; a handed-back entry is a new one); answers the count (0:
// not this consumer's entry).
const Script kRefused{"refused", SP_FENCE R"(
local h = ARGV[4] .. 'task:' .. ARGV[3]
local by = ARGV[1] .. ' ' .. ARGV[2]
if redis.call('HGET', h, 'refused_by') == by then
  return tonumber(redis.call('HGET', h, 'refusals'))
end
redis.call('HSET', h, 'refused_by', by)
return redis.call('HINCRBY', h, 'refusals', 1)
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

// KEYS: stream, later. ARGV: entry, consumer, task id, prefix, retries, now_ms, base_ms,
// multiplier, max_ms, jitter (0..1), then the ended attempts (encoded). While the task has
// retries left after them (its attempts on every node at most 1 + retries), records them and
// defers it until its backoff passes (full jitter over base x multiplier^(n-1), at most max,
// n its attempts so far): `retry_wait` in its hash with its entry's fields packed there, in
// the later set at the due time, its entry acknowledged and deleted; answers 2. Else it writes
// nothing and answers 1: the caller ends it, attempts and all (so a call sent again changes
// nothing twice).
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

}  // namespace sandpool::redis::lua
