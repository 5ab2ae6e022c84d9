-- release (lua::Release): hands back a task this node holds. The entry goes back to the
-- stream as a new one (same fields), for any node to read; the task's hash is queued again.
-- A task asked to cancel ends `cancelled` instead. Answers 1, or 0 when the entry is no
-- longer pending for the consumer.
local stream, done = KEYS[1], KEYS[2]
local entry, consumer, id, prefix, now = unpack(ARGV, 1, 5)

if not pending_for(stream, entry, consumer) then return 0 end
local h = prefix .. 'task:' .. id
release_lease(h, id)
local e = redis.call('XRANGE', stream, entry, entry)
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
if redis.call('HGET', h, 'cancel') == '1' then
  end_cancelled(prefix, h, id, now, done)
  return 1
end
if not e[1] then return 1 end
local again = redis.call('XADD', stream, '*', unpack(e[1][2]))
redis.call('HSET', h, 'state', 'queued', 'entry', again)
return 1
