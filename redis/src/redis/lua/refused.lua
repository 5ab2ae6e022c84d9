-- refused (lua::Refused): a node's refusal of a task it holds (its pool refused the task
-- itself: a type, timeout or payload its config does not accept). Counted in the task's hash
-- once per entry and node (`refused_by`: the same refusal sent again after a lost reply is not
-- counted twice; a deferred entry comes back as a new one), and the node added to the task's
-- refusers (`refusers`, a packed list). Then, when the task has `at_least` refusals and every
-- live node of the pool refused it (a consumer of one of its bands' streams whose heartbeat key
-- `node_prefix`..name lives), it is left for the caller to end `rejected`; else it waits
-- `pause_ms` in the later set, as a throttled task does, so that the node that refused it does
-- not read it again at once while the others are busy. Answers {0} when the entry is no longer
-- pending for the consumer, {refusals, 1} when the caller ends it, {refusals, 0, due} when
-- deferred.
local stream, later = KEYS[1], KEYS[2]
local bands = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local entry, consumer, id, prefix, node_prefix, now, pause_ms, at_least = unpack(ARGV, 1, 8)

if not pending_for(stream, entry, consumer) then return {0} end
local h = prefix .. 'task:' .. id
local by = entry .. ' ' .. consumer
local refusals
if redis.call('HGET', h, 'refused_by') == by then
  refusals = tonumber(redis.call('HGET', h, 'refusals'))
else
  redis.call('HSET', h, 'refused_by', by)
  refusals = redis.call('HINCRBY', h, 'refusals', 1)
end
local refusers, names = {}, {}
local packed = redis.call('HGET', h, 'refusers')
if packed then
  names = cmsgpack.unpack(packed)
  for _, name in ipairs(names) do refusers[name] = true end
end
if not refusers[consumer] then
  refusers[consumer] = true
  names[#names + 1] = consumer
  redis.call('HSET', h, 'refusers', cmsgpack.pack(names))
end

-- True iff some live consumer of the pool has not refused the task.
local function someone_else_may_run_it()
  for _, s in ipairs(bands) do
    local consumers = redis.pcall('XINFO', 'CONSUMERS', s, GROUP)
    if type(consumers) == 'table' and not consumers.err then
      for _, c in ipairs(consumers) do
        for j = 1, #c - 1, 2 do
          if c[j] == 'name' and not refusers[c[j + 1]] and
              redis.call('EXISTS', node_prefix .. c[j + 1]) == 1 then
            return true
          end
        end
      end
    end
  end
  return false
end

if refusals >= tonumber(at_least) and not someone_else_may_run_it() then
  return {refusals, 1}
end
local due = tonumber(now) + tonumber(pause_ms)
release_lease(h, id)  -- a claimed task's, kept from its dead node
local e = redis.call('XRANGE', stream, entry, entry)
if e[1] then
  redis.call('HSET', h, 'state', 'queued', 'deferred', cmsgpack.pack(e[1][2]))
  redis.call('ZADD', later, due, id)
end
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
return {refusals, 0, due}
