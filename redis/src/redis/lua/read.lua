-- read (lua::Read): new entries for the consumer, the higher bands first, at most `count` in
-- all. Answers {band's index in KEYS, entries} for each band that gave some.
local streams = KEYS  -- q:1, q:0, q:-1
local consumer, count = unpack(ARGV, 1, 2)

local left = tonumber(count)
local out = {}
for i = 1, #streams do
  if left <= 0 then break end
  local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', left, 'STREAMS',
                       streams[i], '>')
  if r then
    out[#out + 1] = {i, r[1][2]}
    left = left - #r[1][2]
  end
end
return out
