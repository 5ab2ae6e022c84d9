-- await_end (lua::AwaitEnd): registers a waiter on task `id`'s end (`await` in its hash):
-- the script that writes its end then pushes the end's state to its `end:` list
-- (lib.lua's tell_end); a task that has ended already gets it pushed now. Answers 1, or 0
-- when Redis does not know the task.
local prefix, id = unpack(ARGV, 1, 2)

local h = prefix .. 'task:' .. id
local state = redis.call('HGET', h, 'state')
if not state then return 0 end
redis.call('HSET', h, 'await', '1')
if state == 'completed' or state == 'dead_lettered' or state == 'cancelled' then
  push_end(prefix, id, state)
end
return 1
