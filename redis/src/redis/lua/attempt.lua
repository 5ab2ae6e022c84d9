-- attempt (lua::Attempt): records one ended attempt of a task this node holds: counted, and
-- kept in its hash under its number (`attempt:N`, as finish_batch.lua writes them). Answers 1,
-- or 0 when the entry is no longer pending for the consumer.
local stream = KEYS[1]
local entry, consumer, id, prefix, attempt = unpack(ARGV, 1, 5)

if not pending_for(stream, entry, consumer) then return 0 end
local h = prefix .. 'task:' .. id
local n = redis.call('HINCRBY', h, 'attempts', 1)
redis.call('HSET', h, 'attempt:' .. string.format('%d', n), attempt)
return 1
