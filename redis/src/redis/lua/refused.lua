-- refused (lua::Refused): counts a node's refusal of a task it holds, in the task's hash.
-- Answers the count, or 0 when the entry is no longer pending for the consumer.
local stream = KEYS[1]
local entry, consumer, id, prefix = unpack(ARGV, 1, 4)

if not pending_for(stream, entry, consumer) then return 0 end
return redis.call('HINCRBY', prefix .. 'task:' .. id, 'refusals', 1)
