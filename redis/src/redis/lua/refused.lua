-- refused (lua::Refused): counts a node's refusal of a task it holds, in the task's hash,
-- once per entry and node (`refused_by`: the same refusal sent again after a lost reply is
-- not counted twice; a handed-back entry is a new one).
-- Answers the count, or 0 when the entry is no longer pending for the consumer.
local stream = KEYS[1]
local entry, consumer, id, prefix = unpack(ARGV, 1, 4)

if not pending_for(stream, entry, consumer) then return 0 end
local h = prefix .. 'task:' .. id
local by = entry .. ' ' .. consumer
if redis.call('HGET', h, 'refused_by') == by then
  return tonumber(redis.call('HGET', h, 'refusals'))
end
redis.call('HSET', h, 'refused_by', by)
return redis.call('HINCRBY', h, 'refusals', 1)
