-- throttle (lua::Throttle): defers a task this node holds that is over a rate limit, to when
-- the bucket `bucket` gives its next token (at least `interval_ms` after the bucket's last
-- wake): queued in the later set, its entry's fields packed in its hash. Answers the due
-- time (ms, at least 1), or 0 when the entry is no longer pending for the consumer.
local stream, later, bucket = KEYS[1], KEYS[2], KEYS[3]
local entry, consumer, id, prefix, now, wait_ms, interval_ms = unpack(ARGV, 1, 7)

if not pending_for(stream, entry, consumer) then return 0 end
now = tonumber(now)
local due = now + tonumber(wait_ms)
local wake = tonumber(redis.call('HGET', bucket, 'wake') or '0')
if wake + tonumber(interval_ms) > due then due = wake + tonumber(interval_ms) end
redis.call('HSET', bucket, 'wake', string.format('%.3f', due))
local ttl = redis.call('PTTL', bucket)
if ttl < due - now + 1000 then redis.call('PEXPIRE', bucket, math.ceil(due - now) + 1000) end
local h = prefix .. 'task:' .. id
release_lease(h, id)  -- a claimed task's, kept from its dead node
local e = redis.call('XRANGE', stream, entry, entry)
if e[1] then
  redis.call('HSET', h, 'state', 'queued', 'deferred', cmsgpack.pack(e[1][2]))
  redis.call('HINCRBY', h, 'throttled', 1)
  redis.call('ZADD', later, math.floor(due), id)
end
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
return math.max(1, math.floor(due))
