-- finish_batch (lua::FinishBatch): ends a batch of the tasks this node holds (state
-- completed, dead_lettered, ...), each fenced on its own, in one HSET of its hash each: the
-- end, its attempts (`attempt:N` fields, N their numbers) and the end's mark (`end:ENTRY`,
-- which the readers count with the older `ends`: lib.lua's tell_end). Then their entries
-- acknowledged and deleted with one XACK and one XTRIM (and an XDEL of those above the oldest
-- pending entry) per band, one ZADD into the finished set, the ends told to their waiters
-- (one SMISMEMBER over the batch's ids in the pool-wide `awaited` set, await_end.lua) and the
-- finished tasks past keep_finished evicted, once for the batch. Answers, per end in order, 1,
-- or 0 when its entry is no longer pending for the consumer (or came twice in the batch).
local done, letters = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local consumer, prefix, keep_finished, keep_letters = unpack(ARGV, 1, 4)
-- Then per band (q:1, q:0, q:-1) the lowest and the highest entry id of the batch's ends in
-- it ('' and '' when none, '-' and '+' when the caller could not tell): the fence's ranges.
local first_range = 5
-- Then the ends, in order, as runs (end_runs): each string of ARGV costs Redis ~1,100
-- instructions (parsed, made a Lua string, freed), so what the ends of a run share is sent
-- once. A run of compact ends, 'c': count, band, state, attempts (made: the end's one attempt
-- is the task's attempt number `made`, its attempts before known and one fewer); then per end
-- its task id, entry id, result, now (ms) and its attempt (encoded): no error, no reason, not
-- dead_lettered. An end of any other kind, 'f': its task id, entry id, band, state, result,
-- error, reason, now; its attempts before ('' when unknown: read from the hash), their count
-- n, then its n attempts (encoded).
local first_end, end_head = 11, 10  -- a full end: its 10 fields above, then its attempts
local compact_head, compact_end = 5, 5
local awaited = prefix .. 'awaited'

-- The fence, read once for the batch (lib.lua): an entry used is taken out of it, so a second
-- end or take of it is refused.
local mine = pending_in_ranges(streams, consumer, first_range)

-- A dead letter: the entry's fields, then why and when it died.
local function add_letter(stream, entry, reason, err, now, attempts)
  local e = redis.call('XRANGE', stream, entry, entry)
  local letter = {'MAXLEN', '~', keep_letters, '*'}
  if e[1] then for _, v in ipairs(e[1][2]) do letter[#letter + 1] = v end end
  for _, v in ipairs({'reason', reason, 'error', err, 'dead_lettered_ms', now, 'attempts',
                      attempts}) do
    letter[#letter + 1] = v
  end
  redis.call('XADD', letters, unpack(letter))
end

-- The finished tasks past keep_finished, oldest first: their hashes, attempts lists (written
-- by older versions: the attempts are in the hash now) and idempotency keys deleted, their
-- bytes taken off, in one DECRBY and one DEL, and their waits' marks in one SREM.
local function evict_over()
  local over = redis.call('ZCARD', done) - tonumber(keep_finished)
  if over <= 0 then return end
  local popped = redis.call('ZPOPMIN', done, over)
  local gone, ids, bytes = {}, {}, 0
  for j = 1, #popped, 2 do
    local old = prefix .. 'task:' .. popped[j]
    local f = redis.call('HMGET', old, 'idem_key', 'bytes')
    if f[1] then gone[#gone + 1] = f[1] end
    bytes = bytes + (tonumber(f[2] or '0') or 0)
    gone[#gone + 1] = old
    gone[#gone + 1] = old .. ':attempts'
    ids[#ids + 1] = popped[j]
  end
  redis.call('DECRBY', done .. ':bytes', bytes)
  redis.call('DEL', unpack(gone))
  redis.call('SREM', awaited, unpack(ids))
end

-- A count (a decimal string, or nil: 0) as a number, remembered in `counts` (tonumber is a
-- strtod, and the counts repeat: attempts, ends).
local counts = {}
local function count(s)
  if not s then return 0 end
  local n = counts[s]
  if not n then
    n = tonumber(s) or 0
    counts[s] = n
  end
  return n
end

local band_index = {['1'] = 1, ['0'] = 2, ['-1'] = 3}
local out, acked, n_acked, scores, bytes, memo = {}, {{}, {}, {}}, {0, 0, 0}, {}, 0, {}
local ended, states = {}, {}  -- the ids ended, and their states: told to waiters below
local n_out, n_ended = 0, 0  -- the lengths of out and ended (`#t` is a search in Lua 5.1)

-- An end that passed the fence, written: counted in the lists the batch's commands take.
local function ended_one(s, id, entry, state, now)
  local a, k = acked[s], n_acked[s] + 1
  a[k] = entry
  n_acked[s] = k
  n_ended = n_ended + 1
  ended[n_ended] = id
  states[n_ended] = state
  scores[2 * n_ended - 1] = now
  scores[2 * n_ended] = id
end

-- A run of compact ends from ARGV[i] ('c'): the ends' one HSET each, the fields written in the
-- order and with the values a full end's would have. Returns the index after the run.
local function compact_run(i)
  local count, band, state, made = tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local s = band_index[band]
  local m = s and mine[s]
  local attempt_field = 'attempt:' .. made
  i = i + compact_head
  for _ = 1, count do
    local id, entry, result, now, attempt = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
                                            ARGV[i + 4]
    i = i + compact_end
    n_out = n_out + 1
    if not m or not m[entry] then
      out[n_out] = 0
    else
      m[entry] = nil
      local size = #result
      bytes = bytes + size
      redis.call('HSET', prefix .. 'task:' .. id, 'state', state, 'result', result,
                 'finished_ms', now, 'bytes', decimal(memo, size), 'attempts', made,
                 'end:' .. entry, state, attempt_field, attempt)
      ended_one(s, id, entry, state, now)
      out[n_out] = 1
    end
  end
  return i
end

-- A full end from ARGV[i] ('f'). Returns the index after it.
local function full_end(i)
  local id, entry, band, state, result, err, reason, now, before, attempts = unpack(ARGV, i + 1,
                                                                                  i + end_head)
  local first_attempt, n = i + 1 + end_head, count(attempts)
  local s = band_index[band]
  local stream = streams[s]
  n_out = n_out + 1
  if not s or not mine[s][entry] then
    out[n_out] = 0
    return first_attempt + n
  end
  mine[s][entry] = nil
  local h = prefix .. 'task:' .. id
  -- The attempts before this end's: the node's count (take.lua answered it, and the task
  -- holds no lease of a cap), or, when it sends '' (a claimed entry, a lease, an end kept
  -- in a file), the hash's, with the lease it holds given back.
  local so_far
  if before == '' then
    local f = redis.call('HMGET', h, 'lease', 'attempts')
    if f[1] then
      redis.call('SREM', f[1], id)
      redis.call('HDEL', h, 'lease')
    end
    so_far = count(f[2])
  else
    so_far = count(before)
  end
  local made = decimal(memo, so_far + n)
  if state == 'dead_lettered' then add_letter(stream, entry, reason, err, now, made) end
  local size = #result + #err
  bytes = bytes + size
  -- An empty error and reason are not written: no hash of a task that runs holds either
  -- (only an end writes them, and a replay deletes them), and a missing one reads as empty.
  -- Nor `node`: the fence passed, so the entry is pending for the consumer, and a node
  -- reads or claims an entry and takes it (take.lua, which writes `node`) before it runs it.
  local hash = {'state', state, 'result', result, 'finished_ms', now, 'bytes',
                decimal(memo, size), 'attempts', made, 'end:' .. entry, state}
  if err ~= '' or reason ~= '' then
    hash[13], hash[14], hash[15], hash[16] = 'error', err, 'reason', reason
  end
  for k = 1, n do
    hash[#hash + 1] = 'attempt:' .. decimal(memo, so_far + k)
    hash[#hash + 1] = ARGV[first_attempt + k - 1]
  end
  redis.call('HSET', h, unpack(hash))
  ended_one(s, id, entry, state, now)
  out[n_out] = 1
  return first_attempt + n
end

local i = first_end
while i <= #ARGV do
  if ARGV[i] == 'c' then
    i = compact_run(i)
  else
    i = full_end(i)
  end
end
-- An entry id ("ms-seq") as the position of its dash and its two parts' lengths, for below():
-- nil when it is not one.
local function split_id(e)
  local dash = string.find(e, '-', 1, true)
  if not dash or dash == 1 or dash == #e then return nil end
  return dash
end

-- True iff stream entry id `a` is below `b`, whose dash is at `b_dash` (split_id); false when
-- `a` is not one. Ids are decimal without leading zeros, so a shorter part is a smaller one
-- and parts of one length compare as strings: no number made of either (tonumber and
-- string.match cost a microsecond a time here).
local function below(a, b, b_dash)
  local a_dash = split_id(a)
  if not a_dash then return false end
  if a_dash ~= b_dash then return a_dash < b_dash end  -- the ms parts' lengths differ
  if #a == #b then return a < b end  -- the same shape: the first digit that differs decides
  if string.sub(a, 1, a_dash) ~= string.sub(b, 1, b_dash) then return a < b end
  return #a < #b  -- the same ms, sequence numbers of different lengths
end

-- The ended entries acknowledged, then deleted. Every entry below the oldest one still pending
-- was read (a read takes entries in order, and an XADD's id is above every id read) and is no
-- longer pending, and each script that acknowledges an entry deletes it: so one XTRIM MINID
-- deletes just the ones this batch acknowledged below it, far cheaper than XDEL (which seeks
-- each entry from the start of its stream node); the rest go by XDEL.
for s = 1, 3 do
  local a = acked[s]
  if n_acked[s] > 0 then
    redis.call('XACK', streams[s], GROUP, unpack(a))
    local oldest = redis.call('XPENDING', streams[s], GROUP, '-', '+', 1)
    local floor = oldest[1] and oldest[1][1]
    local floor_dash = floor and split_id(floor)
    if floor_dash then
      redis.call('XTRIM', streams[s], 'MINID', floor)
      local above = {}
      -- When the band's highest end (the fence's range) is below it, all are: none is tested.
      if not below(ARGV[first_range + 2 * s - 1], floor, floor_dash) then
        for _, e in ipairs(a) do
          if not below(e, floor, floor_dash) then above[#above + 1] = e end
        end
      end
      a = above
    end
    if #a > 0 then redis.call('XDEL', streams[s], unpack(a)) end
  end
end
if n_ended == 0 then return out end
-- Who waits on which (the script runs whole: a waiter registered before this end is told
-- here, one after it by await_end.lua at once).
local waits = redis.call('SMISMEMBER', awaited, unpack(ended))
for k = 1, n_ended do
  if waits[k] == 1 then push_end(prefix, ended[k], states[k]) end
end
redis.call('INCRBY', done .. ':bytes', bytes)
redis.call('ZADD', done, unpack(scores))
evict_over()
return out
