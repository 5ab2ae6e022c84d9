-- move_due (lua::MoveDue): each due task of the later set (at most `max`) goes to its band's
-- stream; one asked to cancel (while a node ran it) ends `cancelled`. Answers how many left
-- the later set.
local later, done = KEYS[1], KEYS[5]
local streams = {KEYS[2], KEYS[3], KEYS[4]}  -- q:1, q:0, q:-1
local prefix, now, max = unpack(ARGV, 1, 3)

local ids = redis.call('ZRANGEBYSCORE', later, '-inf', now, 'LIMIT', 0, tonumber(max))
for _, id in ipairs(ids) do
  local h = prefix .. 'task:' .. id
  local packed = redis.call('HGET', h, 'deferred')
  if packed and redis.call('HGET', h, 'cancel') == '1' then
    end_cancelled(prefix, h, id, now, done)
  elseif packed then
    local stream = streams[2 - tonumber(redis.call('HGET', h, 'band') or '0')]
    local entry = redis.call('XADD', stream, '*', unpack(cmsgpack.unpack(packed)))
    redis.call('HSET', h, 'state', 'queued', 'entry', entry)
    redis.call('HDEL', h, 'deferred')
  end
  redis.call('ZREM', later, id)
end
return #ids
