-- The helpers every script of a Redis pool may call: task_stream_scripts.cpp puts this text
-- before each script's own, after `local GROUP` (PoolKeys::kGroup, the streams' one
-- consumer group). Each script then names its KEYS and ARGV in its first lines, in the order
-- of its argument struct's fields (task_stream_scripts.hpp).

-- `n`, a whole number, as a decimal string, remembered in `memo` (a table the caller keeps
-- for one call): Lua writes a number with sprintf("%.14g"), which costs a microsecond, and
-- the counts a script writes (attempts, ends, bytes) repeat.
local function decimal(memo, n)
  local s = memo[n]
  if not s then
    s = string.format('%d', n)
    memo[n] = s
  end
  return s
end

-- True iff `entry` of `stream` is pending for `consumer`: the fence every script of a node
-- opens with (another node that claimed the entry meanwhile may have ended it).
local function pending_for(stream, entry, consumer)
  return #redis.call('XPENDING', stream, GROUP, entry, entry, 1, consumer) == 1
end

-- The fence of a script that checks a batch (take.lua, finish_batch.lua), read once for the
-- call: per band, the entries pending for `consumer` in the band's range, ARGV[first] and
-- ARGV[first + 1] for q:1, the next two for q:0, then q:-1 ('' and '' when the batch has none
-- in that band). One XPENDING per band, not one per entry: the script runs whole, so what it
-- says holds for every entry of the batch. Returns a set per band; the caller takes an entry
-- out of it when it uses one, so a second one of it is refused.
local function pending_in_ranges(streams, consumer, first)
  local mine = {{}, {}, {}}
  for s = 1, 3 do
    local lo, hi = ARGV[first + 2 * s - 2], ARGV[first + 2 * s - 1]
    if lo ~= '' then
      local m = mine[s]
      local pending = redis.call('XPENDING', streams[s], GROUP, lo, hi, '1000000000', consumer)
      for k = 1, #pending do m[pending[k][1]] = true end
    end
  end
  return mine
end

-- A task that stops running here (it ends, waits in the later set, or is handed back) gives
-- back its lease of a type's cap (TaskUpkeep::Cap). `h` is its hash.
local function release_lease(h, id)
  local lease = redis.call('HGET', h, 'lease')
  if lease then
    redis.call('SREM', lease, id)
    redis.call('HDEL', h, 'lease')
  end
end

-- Wakes who waits on task `id` (await_end.lua): its `end:` list gets the end's state, kept 10
-- minutes.
local function push_end(prefix, id, state)
  local ended = prefix .. 'end:' .. id
  redis.call('RPUSH', ended, state)
  redis.call('PEXPIRE', ended, 600000)
end

-- An end of task `id` written in its hash `h`: counted there (`ends`, so that a second end of
-- one run shows), and told to its waiters when one registered (`await`, await_end.lua). The
-- script that writes an end and await_end.lua each run whole, so a waiter registers either
-- before the end (told here) or after it (await_end.lua tells it at once). finish_batch.lua
-- does the same without reading the hash: its end's mark is a field of its own
-- (`end:ENTRY`, which the readers count with `ends`), its waiters are found in the pool-wide
-- `awaited` set, once per batch.
local function tell_end(prefix, h, id, state)
  redis.call('HINCRBY', h, 'ends', 1)
  if redis.call('HEXISTS', h, 'await') == 1 then push_end(prefix, id, state) end
end

-- A task asked to cancel while a node ran it (cancel.lua's flag) ends `cancelled` where it
-- would have gone back to the stream or the later set (release.lua, move_due.lua), so that it
-- runs no more. `h` is its hash, `now` the time (ms), `done` the finished set.
local function end_cancelled(prefix, h, id, now, done)
  redis.call('HSET', h, 'state', 'cancelled', 'error', 'cancelled before it ran again',
             'reason', 'user', 'finished_ms', now)
  redis.call('HDEL', h, 'deferred')
  redis.call('ZADD', done, now, id)
  tell_end(prefix, h, id, 'cancelled')
end

-- Writes task `id` (a decimal string) under an id taken already (add_task's INCR,
-- submit_batch.lua's INCRBY). `s` holds what the tasks of a call share: ids, later, prefix,
-- pool, now; `stream` is the task's band's, `idem` its idempotency key ('' when none),
-- not_before '0' when none; its entry's field/value pairs are argv[from..to] (no copies: a
-- batch passes its ARGV). A task due after now waits in the later set, its entry's fields
-- packed in its hash, as a deferred retry does. `band` is not written when it is '0' (most
-- tasks): a missing one reads as 0 (cancel.lua, move_due.lua; take.lua writes it for a task
-- taken before), one field fewer for each HSET and HMGET of the hash to search.
local function write_task(s, stream, idem, task_type, not_before, band, id, argv, from, to)
  local h = s.prefix .. 'task:' .. id
  local tenant
  for i = from, to - 1, 2 do
    if argv[i] == 'tenant' then tenant = argv[i + 1] end
  end
  -- not_before is '0' for most tasks: no number made of it (tonumber is a strtod).
  local due = not_before == '0' or tonumber(not_before) <= tonumber(s.now)
  if due and band == '0' and idem == '' and not tenant then
    -- Most tasks: the hash's fields as the call's arguments, no table made for them.
    local entry = redis.call('XADD', stream, '*', 'id', id, unpack(argv, from, to))
    redis.call('HSET', h, 'state', 'queued', 'entry', entry, 'pool', s.pool, 'type', task_type,
               'submitted_ms', s.now, 'attempts', '0')
    return
  end
  -- The hash in one HSET: its tenant and idempotency key with the rest.
  local hash = {'pool', s.pool, 'type', task_type, 'submitted_ms', s.now, 'attempts', '0'}
  if band ~= '0' then
    hash[9] = 'band'
    hash[10] = band
  end
  if tenant then
    hash[#hash + 1] = 'tenant'
    hash[#hash + 1] = tenant
  end
  if idem ~= '' then
    redis.call('SET', idem, id)
    hash[#hash + 1] = 'idem_key'
    hash[#hash + 1] = idem
  end
  if not due then
    redis.call('HSET', h, 'state', 'scheduled', 'not_before_ms', not_before, 'deferred',
               cmsgpack.pack({'id', id, unpack(argv, from, to)}), unpack(hash))
    redis.call('ZADD', s.later, not_before, id)
  else
    local entry = redis.call('XADD', stream, '*', 'id', id, unpack(argv, from, to))
    redis.call('HSET', h, 'state', 'queued', 'entry', entry, unpack(hash))
  end
end

-- The body of a submit (submit.lua, claim_slot.lua), after its idempotency key was looked up
-- and found unused: takes an id and writes the task as write_task does, its entry's fields
-- argv[from..#argv]; returns its id (a string: Lua's numbers are doubles, and `..` writes one
-- this large as 4.5e+15). The ids start at PoolKeys::kFirstId (2^52) unless set.
local function add_task(s, stream, idem, task_type, not_before, band, argv, from)
  redis.call('SET', s.ids, '4503599627370495', 'NX')
  redis.call('INCR', s.ids)
  local id = redis.call('GET', s.ids)
  write_task(s, stream, idem, task_type, not_before, band, id, argv, from, #argv)
  return id
end
