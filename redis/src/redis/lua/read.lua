-- read (lua::Read): reads new entries for the consumer, the higher bands first, at most
-- `count` in all, and takes their tasks at once (as take.lua, unfenced: the entries were read
-- by the consumer in this very script): each task's hash says it runs on the consumer (a
-- plain XADD's task gets its hash, submitted when its entry was added). An entry that is not
-- a task (as TaskStream's parse says: an id, a type, numeric options in range) is left for the
-- caller to discard, its hash untouched (attempts -1). Answers {band's index in KEYS,
-- entries, each entry's attempts so far} for each band that gave some.
local streams = {KEYS[1], KEYS[2], KEYS[3]}  -- q:1, q:0, q:-1
local prefix, pool, consumer, count = unpack(ARGV, 1, 4)

-- True iff `s` is a whole decimal number (an optional minus when `signed`) in [lo, hi].
local function whole(s, signed, lo, hi)
  if not string.match(s, signed and '^%-?%d+$' or '^%d+$') or #s > 20 then return false end
  local n = tonumber(s)
  return n >= lo and n <= hi
end

-- The entry's task id, or nil when the entry is not a task (to_entry in task_stream.cpp).
local function task_id(f)
  local id, task_type, ok = nil, nil, true
  for j = 1, #f - 1, 2 do
    local k, v = f[j], f[j + 1]
    if k == 'id' then
      -- Up to 19 digits is below 2^64 without a number made of it (tonumber is a strtod).
      if #v > 0 and #v < 20 and not string.find(v, '%D') then
        id = v
      else
        id = whole(v, false, 0, 18446744073709551615) and v or nil
      end
      ok = ok and id ~= nil
    elseif k == 'type' then
      task_type = v
    elseif k == 'priority' then
      ok = ok and whole(v, true, -2147483648, 2147483647)
    elseif k == 'timeout_ms' then
      ok = ok and whole(v, true, -9223372036854775808, 9223372036854775807)
    elseif k == 'retries' then
      ok = ok and whole(v, false, 0, 4294967295)
    end
  end
  if ok and id and task_type and task_type ~= '' then return id, task_type end
  return nil
end

local left = tonumber(count)
local out = {}
for i = 1, #streams do
  if left <= 0 then break end
  local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', left, 'STREAMS',
                       streams[i], '>')
  if r then
    local entries, attempts, band = r[1][2], {}, 2 - i
    for k, e in ipairs(entries) do
      local id, task_type = task_id(e[2])
      if id then
        local h = prefix .. 'task:' .. id
        -- HSET answers how many fields are new. Just `node` (1): the task was submitted,
        -- replayed or moved from the later set, and no node has read it since (no script but a
        -- read or a take sets `node`, and only a node's fenced scripts count attempts), so it
        -- made no attempt yet, and its `entry` and `band` are this entry's (the script that
        -- added the entry wrote them). Otherwise they are written, and its attempts read: one
        -- read before (0), or no hash (2: a plain XADD's task, whose hash is written here).
        local added = redis.call('HSET', h, 'state', 'running', 'node', consumer)
        local before = '0'
        if added ~= 1 then
          redis.call('HSET', h, 'entry', e[1], 'band', band)
          before = redis.call('HGET', h, 'attempts')
        end
        if not before then
          redis.call('HSET', h, 'pool', pool, 'type', task_type, 'attempts', 0, 'submitted_ms',
                     string.match(e[1], '^(%d+)') or '0')
        end
        attempts[k] = tonumber(before or '0')
      else
        attempts[k] = -1
      end
    end
    out[#out + 1] = {i, entries, attempts}
    left = left - #entries
  end
end
return out
