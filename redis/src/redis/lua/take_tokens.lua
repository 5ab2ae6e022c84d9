-- take_tokens (lua::TakeTokens): a token from each of a task's rate buckets, and its lease of a
-- type's cap. Fenced when `entry` is set: an entry no longer pending for the consumer
-- (another node claimed it while this one stalled; it may have ended it) takes nothing and
-- answers {-1, 0, 0}, so a stale node neither spends tokens nor leaves a lease no end gives
-- back. The cap comes next: a task that holds no lease while the set holds `cap_max` gets {0,
-- 100, the cap's index (from 1)}: it is tried again 100 ms later. Each bucket is a hash:
-- `tokens` (fractional) and `at` (when they were counted, in µs of Redis's clock). Refills
-- each at tasks/per up to its burst; takes one from each (and the lease) when every one holds
-- a whole token ({1, 0, 0}); else takes none and answers {0, the wait in ms until the bucket
-- furthest from a token has one, that bucket's index (from 1)}. A bucket idle long enough to
-- be full expires.
-- KEYS: the buckets, then the cap's lease set with a cap, then the entry's stream when fenced.
local buckets, with_cap, entry, consumer = unpack(ARGV, 1, 4)
local first_bucket = 5  -- per bucket: its tasks, per (ms) and burst; then with a cap: its max,
                        -- the task's id and the prefix
buckets = tonumber(buckets)
local has_cap = with_cap == '1'

if entry ~= '' and not pending_for(KEYS[buckets + (has_cap and 2 or 1)], entry, consumer) then
  return {-1, 0, 0}
end
local cap, id, cap_max, prefix = nil, nil, nil, nil
if has_cap then
  local at = first_bucket + 3 * buckets
  cap, cap_max, id, prefix = KEYS[buckets + 1], tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2]
  if redis.call('SISMEMBER', cap, id) == 0 and redis.call('SCARD', cap) >= cap_max then
    return {0, 100, buckets + 1}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local level, wait, worst = {}, 0, 0
for i = 1, buckets do
  local a = first_bucket + 3 * (i - 1)
  local tasks, per, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1]) * 1000, tonumber(ARGV[a + 2])
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens or not at then tokens, at = burst, now end
  if now > at then tokens = tokens + (now - at) * tasks / per end
  tokens = math.min(burst, tokens)
  level[i] = tokens
  if tokens < 1 then
    local w = math.ceil((1 - tokens) * per / tasks / 1000)
    if w > wait or worst == 0 then wait, worst = w, i end
  end
end
if worst > 0 then return {0, wait, worst} end
if cap then
  redis.call('SADD', cap, id)
  redis.call('HSET', prefix .. 'task:' .. id, 'lease', cap)
end
for i = 1, buckets do
  local a = first_bucket + 3 * (i - 1)
  local tasks, per, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.6f', level[i] - 1),
             'at', string.format('%.0f', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(burst * per / tasks) + 1000)
end
return {1, 0, 0}
