-- take (lua::Take): the tasks of entries this node read (a plain XREADGROUP, or claimed) now
-- run on it. Fenced per entry: one no longer pending for the consumer (a node that stalled
-- between its read and this, and another claimed the entry meanwhile, and may have ended it)
-- is left alone and answers -1. Each other task's hash says it runs on the consumer (a plain
-- XADD's task gets its hash, submitted when its entry was added); answers each task's
-- attempts so far. Entries read beyond the read's count are handed back first, unread.
local streams = {KEYS[1], KEYS[2], KEYS[3]}  -- q:1, q:0, q:-1
local prefix, pool, consumer = unpack(ARGV, 1, 3)
-- Then per band (q:1, q:0, q:-1) the lowest and the highest entry id of the entries in it
-- ('' and '' when none, '-' and '+' when the caller could not tell): the fence's ranges.
local first_range = 4
-- Then per band the count of entries handed back (a read over every band got more than its
-- count: the lower bands' surplus); then for each band with some, the id just below its
-- first ('' when none), then its entry ids in the order read; then the entries to take, in
-- order, as runs of entries that share their band and type (each string of ARGV costs Redis
-- ~1,100 instructions, so those are sent once a run): a run's count, band and type, then per
-- entry its task id and entry id.
local first_back, run_head, per_task = 13, 3, 2
local back_n = {tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])}

-- The group's last delivered id on `stream`.
local function last_delivered(stream)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, last
    for k = 1, #g - 1, 2 do
      if g[k] == 'name' then
        name = g[k + 1]
      elseif g[k] == 'last-delivered-id' then
        last = g[k + 1]
      end
    end
    if name == GROUP then return last end
  end
end

-- Hands back, unread, the entries ARGV[at .. at + n - 1] of streams[s] (read just now, in
-- order), those still pending for the consumer: acknowledged, and when nobody read past them
-- the group's last delivered id goes back to `below` (the id just below the first), so the
-- next read of any node gets them, in their place; else each goes back as a new entry (the
-- task's hash told its new entry), as release.lua does.
local function hand_back(s, below, at, n)
  local stream = streams[s]
  local held = {}
  for _, p in ipairs(redis.call('XPENDING', stream, GROUP, ARGV[at], ARGV[at + n - 1], n,
                                consumer)) do
    held[p[1]] = true
  end
  local ids = {}
  for i = at, at + n - 1 do
    if held[ARGV[i]] then ids[#ids + 1] = ARGV[i] end
  end
  if #ids == 0 then return end
  redis.call('XACK', stream, GROUP, unpack(ids))
  if #ids == n and below ~= '' and last_delivered(stream) == ARGV[at + n - 1] then
    redis.call('XGROUP', 'SETID', stream, GROUP, below)
    -- SETID wakes no read blocked on the stream; an entry added (and deleted at once) does,
    -- and that read then gets these.
    redis.call('XDEL', stream, redis.call('XADD', stream, '*', 'wake', '1'))
    return
  end
  for _, entry in ipairs(ids) do
    local e = redis.call('XRANGE', stream, entry, entry)
    redis.call('XDEL', stream, entry)
    if e[1] then
      local fields = e[1][2]
      local again = redis.call('XADD', stream, '*', unpack(fields))
      for k = 1, #fields - 1, 2 do
        if fields[k] == 'id' then
          local h = prefix .. 'task:' .. fields[k + 1]
          if redis.call('EXISTS', h) == 1 then redis.call('HSET', h, 'entry', again) end
        end
      end
    end
  end
end

local first_task = first_back
for s = 1, 3 do
  local n = back_n[s]
  if n > 0 then
    hand_back(s, ARGV[first_task], first_task + 1, n)
    first_task = first_task + 1 + n
  end
end

-- The fence, read once for the batch (lib.lua): an entry used is taken out of it, so a second
-- end or take of it is refused.
local mine = pending_in_ranges(streams, consumer, first_range)

local band_index = {['1'] = 1, ['0'] = 2, ['-1'] = 3}
local out, n_out = {}, 0  -- `#out` is a search in Lua 5.1: its length kept
local i = first_task
while i <= #ARGV do
  local count, band, task_type = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2]
  local s = band_index[band]
  local m = s and mine[s]
  i = i + run_head
  for _ = 1, count do
    local id, entry = ARGV[i], ARGV[i + 1]
    i = i + per_task
    n_out = n_out + 1
    if not m or not m[entry] then
      out[n_out] = -1
    else
      m[entry] = nil
      local h = prefix .. 'task:' .. id
      -- HSET answers how many fields are new. Just `node` (1): the task was submitted,
      -- replayed or moved from the later set, and no node has taken it since (only a take sets
      -- `node`, an end writes the same again, a replay deletes it; only a node's fenced scripts
      -- count attempts), so it made no attempt yet, and its `entry` and `band` are this entry's
      -- (the script that added the entry wrote them). Otherwise they are written, and its
      -- attempts read: taken before (0), or no hash (2: a plain XADD's task, made here).
      local before = 0
      if redis.call('HSET', h, 'state', 'running', 'node', consumer) ~= 1 then
        redis.call('HSET', h, 'entry', entry, 'band', band)
        local stored = redis.call('HGET', h, 'attempts')
        if stored then
          before = tonumber(stored) or 0
        else
          redis.call('HSET', h, 'pool', pool, 'type', task_type, 'attempts', 0, 'submitted_ms',
                     string.match(entry, '^(%d+)') or '0')
        end
      end
      out[n_out] = before
    end
  end
end
return out
