-- take (lua::Take): the tasks of entries this node read (a plain XREADGROUP, or claimed) now
-- run on it. Fenced per entry: one no longer pending for the consumer (a node that stalled
-- between its read and this, and another claimed the entry meanwhile, and may have ended it)
-- is left alone and answers -1. Each other task's hash says it runs on the consumer (a plain
-- XADD's task gets its hash, submitted when its entry was added); answers each task's
-- attempts so far.
local streams = {KEYS[1], KEYS[2], KEYS[3]}  -- q:1, q:0, q:-1
local prefix, pool, consumer = unpack(ARGV, 1, 3)
-- Then per band (q:1, q:0, q:-1) the lowest and the highest entry id of the entries in it
-- ('' and '' when none, '-' and '+' when the caller could not tell): the fence's ranges.
local first_range = 4
local first_task, per_task = 10, 4  -- then per entry: task id, entry id, band, type

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
