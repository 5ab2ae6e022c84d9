-- take (lua::Take): the tasks of entries this node read now run on it. Fenced per entry: one
-- no longer pending for the consumer (a node that stalled between its read and this, and
-- another claimed the entry meanwhile, and may have ended it) is left alone and answers -1.
-- Each other task's hash says it runs on the consumer (a plain XADD's task gets its hash,
-- submitted when its entry was added); answers each task's attempts so far.
local streams = {KEYS[1], KEYS[2], KEYS[3]}  -- q:1, q:0, q:-1
local prefix, pool, consumer = unpack(ARGV, 1, 3)
local first_task, per_task = 4, 4  -- then per entry: task id, entry id, band, type

local out = {}
for i = first_task, #ARGV, per_task do
  local id, entry, band, task_type = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local stream = streams[2 - tonumber(band)]
  local h = prefix .. 'task:' .. id
  if not pending_for(stream, entry, consumer) then
    out[#out + 1] = -1
  else
    if redis.call('EXISTS', h) == 0 then
      redis.call('HSET', h, 'pool', pool, 'type', task_type, 'attempts', 0, 'submitted_ms',
                 string.match(entry, '^(%d+)') or '0')
    end
    redis.call('HSET', h, 'state', 'running', 'node', consumer, 'entry', entry, 'band', band)
    out[#out + 1] = tonumber(redis.call('HGET', h, 'attempts') or '0')
  end
end
return out
