-- submit_batch (lua::SubmitBatch): a batch of tasks submitted as submit.lua submits each, in
-- order, in one script: the ids of the new ones taken with one INCRBY. A task whose
-- idempotency key names a task (in Redis, or an earlier task of this batch) adds nothing.
-- Answers per task, in order, its new id (an integer), or {the first task's id, 0} when its key
-- names one: no table per new task (a table each, and its reply, cost Redis ~5,000
-- instructions a task, a tenth of the submit's).
local ids, later = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local first_idem = 6                          -- then per task its idempotency key ('': none)
local prefix, pool, now = unpack(ARGV, 1, 3)
local first_task, task_head = 4, 4  -- per task: type, not_before, band, #fields; its fields

-- `n` (a whole number below 2^53) in decimal, without Lua's number formatting (sprintf
-- "%.14g", a microsecond each): the digits above the last three written once per thousand.
local above, above_s = -1, ''
local function decimal_id(n)
  local a = math.floor(n / 1000)
  if a ~= above then above, above_s = a, string.format('%d', a) end
  local l = n - a * 1000
  return above_s .. string.char(48 + math.floor(l / 100), 48 + math.floor(l / 10) % 10, 48 + l % 10)
end

-- Where each task's arguments start (at) and its entry's last field (last), and for a task
-- whose key names one (named): the id in Redis (a string), or the index of the task of this
-- batch that took the key first. Each count of fields made a number once (memo: tonumber is a
-- strtod, and the counts repeat).
local at, last, named, by_idem, fresh, counts = {}, {}, {}, {}, 0, {}
local i = first_task
while i <= #ARGV do
  local k = #at + 1
  at[k] = i
  local n_s = ARGV[i + task_head - 1]
  local n = counts[n_s]
  if not n then
    n = tonumber(n_s)
    counts[n_s] = n
  end
  last[k] = i + task_head + n - 1
  local idem = KEYS[first_idem + k - 1]
  if idem ~= '' then
    named[k] = by_idem[idem] or redis.call('GET', idem)
    if not named[k] then by_idem[idem] = k end  -- later tasks with this key answer its id
  end
  if not named[k] then fresh = fresh + 1 end
  i = last[k] + 1
end

local next_id = 0
if fresh > 0 then
  redis.call('SET', ids, '4503599627370495', 'NX')
  next_id = redis.call('INCRBY', ids, fresh) - fresh + 1  -- exact: below 2^53
end
local shared = {later = later, prefix = prefix, pool = pool, now = now}
local band_index = {['1'] = 1, ['0'] = 2, ['-1'] = 3}
local out, made = {}, {}
for k = 1, #at do
  if not named[k] then
    local a = at[k]
    local task_type, not_before, band = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    write_task(shared, streams[band_index[band] or 2 - tonumber(band)], KEYS[first_idem + k - 1],
               task_type, not_before, band, decimal_id(next_id), ARGV, a + task_head, last[k])
    made[k] = next_id
    out[k] = next_id
    next_id = next_id + 1
  end
end
for k = 1, #at do
  local first = named[k]
  if first then out[k] = {type(first) == 'number' and made[first] or tonumber(first), 0} end
end
return out
