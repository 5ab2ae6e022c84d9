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
-- first ('' when none), then its entry ids in the order read; then per entry: task id, entry
-- id, band, type.
local first_back, per_task = 13, 4
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
local out = {}
for i = first_task, #ARGV, per_task do
  local id, entry, band, task_type = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local s = band_index[band]
  if not s or not mine[s][entry] then
    out[#out + 1] = -1
  else
    mine[s][entry] = nil
    local h = prefix .. 'task:' .. id
    -- HSET answers how many fields are new. Just `node` (1): the task was submitted,
    -- replayed or moved from the later set, and no node has taken it since (only a take sets
    -- `node`, an end writes the same again, a replay deletes it; only a node's fenced scripts
    -- count attempts), so it made no attempt yet, and its `entry` and `band` are this entry's
    -- (the script that added the entry wrote them). Otherwise they are written, and its
    -- attempts read: taken before (0), or no hash (2: a plain XADD's task, made here).
    local added = redis.call('HSET', h, 'state', 'running', 'node', consumer)
    local before = '0'
    if added ~= 1 then
      redis.call('HSET', h, 'entry', entry, 'band', band)
      before = redis.call('HGET', h, 'attempts')
    end
    if not before then
      redis.call('HSET', h, 'pool', pool, 'type', task_type, 'attempts', 0, 'submitted_ms',
                 string.match(entry, '^(%d+)') or '0')
    end
    out[#out + 1] = tonumber(before or '0')
  end
end
return out
