-- submit_batch (lua::SubmitBatch): a batch of tasks submitted as submit.lua submits each, in
-- order, in one script: the ids of the new ones taken with one INCRBY. A task whose
-- idempotency key names a task (in Redis, or an earlier task of this batch) adds nothing.
-- Answers per task, in order, its new id (an integer), or {the first task's id, 0} when its key
-- names one: no table per new task (a table each, and its reply, cost Redis ~5,000
-- instructions a task, a tenth of the submit's).
local ids, later = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local first_idem = 6  -- then the idempotency key of each full task, in order ('': none)
local prefix, pool, now = unpack(ARGV, 1, 3)
-- Then the tasks, in order, as runs (each string of ARGV costs Redis ~1,100 instructions, so
-- what the tasks of a run share is sent once). A full task, 'f': type, not_before, band, the
-- count of its entry's fields, its fields. A run of compact tasks (no idempotency key; one
-- type, not_before, band and entry but for the payload's value), 'c': count, type,
-- not_before, band, the index among the fields of the payload's value, the count of the
-- fields, the fields (the payload's value empty); then each task's payload.
local first_task, task_head, run_head = 4, 5, 7
-- `n` (a whole number below 2^53) in decimal, without Lua's number formatting (sprintf
-- "%.14g", a microsecond each): the digits above the last three written once per thousand.
local above, above_s = -1, ''
local function decimal_id(n)
  local a = math.floor(n / 1000)
  if a ~= above then above, above_s = a, string.format('%d', a) end
  local l = n - a * 1000
  return above_s .. string.char(48 + math.floor(l / 100), 48 + math.floor(l / 10) % 10, 48 + l % 10)
end

-- Per full task, where its arguments start (at: its type) and its entry's last field (last),
-- and when its key names one (named) the id in Redis (a string), or the index of the task of
-- this batch that took the key first; per run of compact tasks, the run at its first task's
-- index (run_at). Each count made a number once (memo: tonumber is a strtod, and the counts
-- repeat).
local at, last, named, by_idem, fresh, counts, run_at = {}, {}, {}, {}, 0, {}, {}
local n_tasks, n_idem = 0, 0
local function number(s)
  local n = counts[s]
  if not n then
    n = tonumber(s)
    counts[s] = n
  end
  return n
end
local i = first_task
while i <= #ARGV do
  if ARGV[i] == 'c' then
    -- A run: its entry's fields copied once into a table of their own, the payload's slot
    -- set per task below.
    local count, n_fields = number(ARGV[i + 1]), number(ARGV[i + 6])
    local run = {count = count, type = ARGV[i + 2], not_before = ARGV[i + 3], band = ARGV[i + 4],
                 slot = number(ARGV[i + 5]), n = n_fields, fields = {unpack(ARGV, i + run_head,
                 i + run_head + n_fields - 1)}, at = i + run_head + n_fields}
    -- Most runs: due now, band 0, no tenant: write_task's first case (lib.lua), done here
    -- with what the run's tasks share looked up once.
    local tenant = false
    for f = 1, n_fields - 1, 2 do
      if run.fields[f] == 'tenant' then tenant = true end
    end
    run.fast = not tenant and run.band == '0' and
                   (run.not_before == '0' or tonumber(run.not_before) <= tonumber(now))
    run_at[n_tasks + 1] = run
    n_tasks = n_tasks + count
    i = run.at + count
    fresh = fresh + count
  else
    n_tasks = n_tasks + 1
    local k = n_tasks
    at[k] = i + 1
    last[k] = i + task_head + number(ARGV[i + task_head - 1]) - 1
    n_idem = n_idem + 1
    local idem = KEYS[first_idem + n_idem - 1]
    if idem ~= '' then
      named[k] = by_idem[idem] or redis.call('GET', idem)
      if not named[k] then by_idem[idem] = k end  -- later tasks with this key answer its id
    end
    if not named[k] then fresh = fresh + 1 end
    i = last[k] + 1
  end
end

local next_id = 0
if fresh > 0 then
  redis.call('SET', ids, '4503599627370495', 'NX')
  next_id = redis.call('INCRBY', ids, fresh) - fresh + 1  -- exact: below 2^53
end
local shared = {later = later, prefix = prefix, pool = pool, now = now}
local band_index = {['1'] = 1, ['0'] = 2, ['-1'] = 3}
local out, made = {}, {}
local idem_of = first_idem - 1
local k = 1
while k <= n_tasks do
  local run = run_at[k]
  if run then  -- a run of compact tasks: each its run's entry with its payload
    local fields, slot, n, a, task_type = run.fields, run.slot, run.n, run.at, run.type
    local stream = streams[band_index[run.band] or 2 - tonumber(run.band)]
    for j = 0, run.count - 1 do
      fields[slot] = ARGV[a + j]
      local id = decimal_id(next_id)
      if run.fast then
        local entry = redis.call('XADD', stream, '*', 'id', id, unpack(fields, 1, n))
        redis.call('HSET', prefix .. 'task:' .. id, 'state', 'queued', 'entry', entry, 'pool',
                   pool, 'type', task_type, 'submitted_ms', now, 'attempts', '0')
      else
        write_task(shared, stream, '', task_type, run.not_before, run.band, id, fields, 1, n)
      end
      out[k + j] = next_id
      next_id = next_id + 1
    end
    k = k + run.count
  else
    local a, l = at[k], last[k]
    idem_of = idem_of + 1
    if not named[k] then
      local task_type, not_before, band = ARGV[a], ARGV[a + 1], ARGV[a + 2]
      write_task(shared, streams[band_index[band] or 2 - tonumber(band)], KEYS[idem_of],
                 task_type, not_before, band, decimal_id(next_id), ARGV, a + task_head - 1, l)
      made[k] = next_id
      out[k] = next_id
      next_id = next_id + 1
    end
    k = k + 1
  end
end
for k = 1, n_tasks do
  local first = named[k]
  if first then out[k] = {type(first) == 'number' and made[first] or tonumber(first), 0} end
end
return out
