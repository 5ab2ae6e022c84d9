-- discard (lua::Discard): drops an entry this node holds. Answers 1, or 0 when the entry is no
-- longer pending for the consumer.
local stream = KEYS[1]
local entry, consumer = unpack(ARGV, 1, 2)

if not pending_for(stream, entry, consumer) then return 0 end
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
return 1
