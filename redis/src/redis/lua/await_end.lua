-- await_end (lua::AwaitEnd): registers a waiter on task `id`'s end: `id` in the pool-wide
-- `awaited` set (which finish_batch.lua checks once per batch) and `await` in its hash (which
-- lib.lua's tell_end checks, and the finish_batch.lua of older versions); the script that
-- writes its end then pushes the end's state to its `end:` list; a task that has ended
-- already gets it pushed now. Both stay until the hash is evicted (a replayed task's next end
-- is told too). Answers 1, or 0 when Redis does not know the task.
local prefix, id = unpack(ARGV, 1, 2)

local h = prefix .. 'task:' .. id
local state = redis.call('HGET', h, 'state')
if not state then return 0 end
redis.call('HSET', h, 'await', '1')
redis.call('SADD', prefix .. 'awaited', id)
if state == 'completed' or state == 'dead_lettered' or state == 'cancelled' then
  push_end(prefix, id, state)
end
return 1
