-- beat (lua::Beat): a node's heartbeat key, held by one identity. Answers 1, or the identity
-- of another process holding the node's name.
local node_key = KEYS[1]
local identity, ttl_ms = unpack(ARGV, 1, 2)

local holder = redis.call('GET', node_key)
if holder and holder ~= identity then return holder end
redis.call('SET', node_key, identity, 'PX', ttl_ms)
return 1
