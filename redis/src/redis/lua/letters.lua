-- letters (lua::Letters): one chunk of a replay or purge of a pool's dead letters, over
-- XRANGE from..to ('fwd') or XREVRANGE from..to ('rev'), `count` letters at most, stopping
-- after `max_matches` (0: any number); a filter field '' matches any. Answers {next ('' when
-- the sweep is done, else the exclusive bound to go on from), purged, {replayed ids}, {id,
-- why, ...} of the letters a replay left}.
local letters, done = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local prefix, pool, action, order, from, to, count, max_matches, now, max_timeout_ms =
    unpack(ARGV, 1, 10)
local want_type, want_reason, want_id, from_ms, until_ms = unpack(ARGV, 11, 15)

local range
if order == 'rev' then
  range = redis.call('XREVRANGE', letters, from, to, 'COUNT', count)
else
  range = redis.call('XRANGE', letters, from, to, 'COUNT', count)
end
local own = {reason = true, error = true, dead_lettered_ms = true, attempts = true}
local max, matched, purged, replayed, refused = tonumber(max_matches), 0, 0, {}, {}
local last = nil
for _, e in ipairs(range) do
  if max > 0 and matched >= max then break end
  last = e[1]
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local at = tonumber(f.dead_lettered_ms or '')
  if (want_type == '' or f.type == want_type) and (want_reason == '' or f.reason == want_reason)
      and (want_id == '' or f.id == want_id)
      and (from_ms == '' or (at ~= nil and at >= tonumber(from_ms)))
      and (until_ms == '' or (at ~= nil and at < tonumber(until_ms))) then
    matched = matched + 1
    if action == 'purge' then
      purged = purged + redis.call('XDEL', letters, e[1])
    else
      local h = prefix .. 'task:' .. (f.id or '')
      local why = nil
      if not f.id or not f.type or f.type == '' then
        why = 'letter ' .. e[1] .. ' is not a task (no id or type)'
      else
        local state = redis.call('HGET', h, 'state')
        if state and state ~= 'dead_lettered' and state ~= 'completed' and state ~= 'cancelled' then
          why = 'task ' .. f.id .. ' is live (' .. state .. '): its letter was left'
        elseif f.timeout_ms and tonumber(f.timeout_ms) and
            tonumber(f.timeout_ms) > tonumber(max_timeout_ms) then
          why = 'task ' .. f.id .. ': timeout_ms ' .. f.timeout_ms ..
                ' is over the pool\'s max_timeout (' .. max_timeout_ms .. ' ms): its letter was left'
        end
      end
      if why then
        refused[#refused + 1] = f.id or '?'
        refused[#refused + 1] = why
      else
        local fields = {}
        for i = 1, #e[2], 2 do
          if not own[e[2][i]] then
            fields[#fields + 1] = e[2][i]
            fields[#fields + 1] = e[2][i + 1]
          end
        end
        local priority = tonumber(f.priority or '0') or 0
        local band = priority > 0 and 1 or (priority < 0 and -1 or 0)
        local entry = redis.call('XADD', streams[2 - band], '*', unpack(fields))
        redis.call('XDEL', letters, e[1])
        if redis.call('ZREM', done, f.id) == 1 then  -- no longer a kept finished task
          redis.call('DECRBY', done .. ':bytes', tonumber(redis.call('HGET', h, 'bytes') or '0'))
        end
        -- Its attempts go: the hash's `attempt:N` fields, and the list an older version kept.
        -- Its ends stay counted (`ends`, `end:ENTRY`).
        redis.call('DEL', h .. ':attempts')
        local gone = {'result', 'error', 'reason', 'finished_ms', 'node', 'cancel', 'deferred',
                      'idem_key', 'not_before_ms', 'tenant', 'bytes', 'lease', 'refusals',
                      'refusers', 'refused_by'}  -- a replayed `rejected` task starts anew
        for _, k in ipairs(redis.call('HKEYS', h)) do
          if string.sub(k, 1, 8) == 'attempt:' then gone[#gone + 1] = k end
        end
        redis.call('HDEL', h, unpack(gone))
        redis.call('HSET', h, 'state', 'queued', 'pool', pool, 'type', f.type,
                   'submitted_ms', now, 'entry', entry, 'attempts', 0, 'band', band)
        if f.tenant then redis.call('HSET', h, 'tenant', f.tenant) end
        if f.idem then
          -- The key names this task again, unless another task took it since.
          local k = prefix .. 'idem:' .. f.idem
          if redis.call('SET', k, f.id, 'NX') or redis.call('GET', k) == f.id then
            redis.call('HSET', h, 'idem_key', k)
          end
        end
        replayed[#replayed + 1] = f.id
      end
    end
  end
end
local cursor = ''
if #range == tonumber(count) and not (max > 0 and matched >= max) then cursor = '(' .. last end
return {cursor, purged, replayed, refused}
