-- touch (lua::Touch): resets the idle time of the entries still pending for the consumer (a
-- live node's beat). Answers how many.
local stream = KEYS[1]
local consumer = ARGV[1]  -- then the entry ids, from ARGV[2] on

local touched = 0
for i = 2, #ARGV do
  if pending_for(stream, ARGV[i], consumer) then
    redis.call('XCLAIM', stream, GROUP, consumer, 0, ARGV[i], 'JUSTID')
    touched = touched + 1
  end
end
return touched
