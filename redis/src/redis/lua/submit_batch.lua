-- submit_batch (lua::SubmitBatch): a batch of tasks submitted as submit.lua submits each, in
-- order, in one script: the ids of the new ones taken with one INCRBY. A task whose
-- idempotency key names a task (in Redis, or an earlier task of this batch) adds nothing.
-- Answers per task, in order, {id, 1}, or {the first task's id, 0} when its key names one.
local ids, later = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local first_idem = 6                          -- then per task its idempotency key ('': none)
local prefix, pool, now = unpack(ARGV, 1, 3)
local first_task, task_head = 4, 4  -- per task: type, not_before, band, #fields; its fields

-- The tasks as add_task's `t` (lib.lua); `first` when its key names a task already.
local tasks, by_idem, fresh = {}, {}, 0
local i = first_task
while i <= #ARGV do
  local task_type, not_before, band, n = unpack(ARGV, i, i + task_head - 1)
  local t = {ids = ids, stream = streams[2 - tonumber(band)], idem = KEYS[first_idem + #tasks],
             later = later, prefix = prefix, pool = pool, now = now, task_type = task_type,
             not_before = not_before, band = band,
             fields = {unpack(ARGV, i + task_head, i + task_head + tonumber(n) - 1)}}
  i = i + task_head + tonumber(n)
  if t.idem ~= '' then
    t.first = by_idem[t.idem] or redis.call('GET', t.idem)
    if not t.first then by_idem[t.idem] = t end  -- later tasks with this key answer its id
  end
  if not t.first then fresh = fresh + 1 end
  tasks[#tasks + 1] = t
end

local next_id = 0
if fresh > 0 then
  redis.call('SET', ids, '4503599627370495', 'NX')
  next_id = redis.call('INCRBY', ids, fresh) - fresh + 1  -- exact: below 2^53
end
local out = {}
for k, t in ipairs(tasks) do
  if t.first then
    out[k] = {0, 0}  -- its first task's id, filled in below (it may be of this batch)
  else
    t.id = write_task(t, string.format('%.0f', next_id))
    next_id = next_id + 1
    out[k] = {tonumber(t.id), 1}
  end
end
for k, t in ipairs(tasks) do
  if t.first then
    out[k][1] = tonumber(type(t.first) == 'table' and t.first.id or t.first)
  end
end
return out
