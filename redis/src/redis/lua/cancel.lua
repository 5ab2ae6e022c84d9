-- cancel (lua::Cancel): asks a task to stop. Answers {code, state}: -1 no such task; 0
-- already ended; 1 cancelled here (queued and not read, waiting out a backoff, or
-- scheduled), or flagged for the node that runs it (state as it is).
local later, done = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local prefix, id, now = unpack(ARGV, 1, 3)

local h = prefix .. 'task:' .. id
local state = redis.call('HGET', h, 'state')
if not state then return {-1, ''} end
if state == 'completed' or state == 'dead_lettered' or state == 'cancelled' then
  return {0, state}
end
local entry = redis.call('HGET', h, 'entry')
local unread = false
if redis.call('ZREM', later, id) == 1 then  -- a backoff, scheduled, or over a rate limit
  unread = true
elseif entry then
  local stream = streams[2 - tonumber(redis.call('HGET', h, 'band') or '0')]
  local pending = redis.call('XPENDING', stream, GROUP, entry, entry, 1)
  unread = #pending == 0 and redis.call('XDEL', stream, entry) == 1
end
if not unread then
  redis.call('HSET', h, 'cancel', '1')
  return {1, state}
end
redis.call('HSET', h, 'state', 'cancelled', 'error', 'cancelled before it ran', 'reason', 'user',
           'finished_ms', now)
redis.call('HDEL', h, 'deferred')
redis.call('ZADD', done, now, id)
tell_end(prefix, h, id, 'cancelled')
return {1, 'cancelled'}
