-- trim_finished (lua::TrimFinished): evicts the finished tasks older than the age bound, then
-- the oldest while the bytes are over, at most `max_evicted` in one call: each task's hash, the
-- attempts list an older version wrote beside it, its idempotency key and its wait's mark in
-- the pool-wide `awaited` set (await_end.lua). Answers how many.
local done, done_bytes = KEYS[1], KEYS[2]
local prefix, oldest_kept_ms, max_bytes, max_evicted = unpack(ARGV, 1, 4)

local budget = tonumber(max_evicted)
local function evict(id)
  local h = prefix .. 'task:' .. id
  local idem = redis.call('HGET', h, 'idem_key')
  if idem then redis.call('DEL', idem) end
  redis.call('DECRBY', done_bytes, tonumber(redis.call('HGET', h, 'bytes') or '0'))
  redis.call('DEL', h, h .. ':attempts')
  redis.call('SREM', prefix .. 'awaited', id)
  redis.call('ZREM', done, id)
  budget = budget - 1
end
local old = redis.call('ZRANGEBYSCORE', done, '-inf', '(' .. oldest_kept_ms, 'LIMIT', 0, budget)
for _, id in ipairs(old) do evict(id) end
while budget > 0 and tonumber(redis.call('GET', done_bytes) or '0') > tonumber(max_bytes) do
  local oldest = redis.call('ZRANGE', done, 0, 0)
  if not oldest[1] then break end
  evict(oldest[1])
end
return tonumber(max_evicted) - budget
