-- claim_idle (lua::ClaimIdle): claims a band's pending entries idle for min_idle_ms or more
-- whose consumer's heartbeat key is gone (a dead node's), or that are the claimant's own (a
-- live node touches what it holds every beat: its own idle ones are a previous run's), at
-- most `max`, looking at `page` pending entries from `start` (an entry id, "(" before it:
-- after it). Answers {the last entry id looked at ('' when none), the claimed entries}.
local stream = KEYS[1]
local consumer, min_idle_ms, max, node_prefix, start, page = unpack(ARGV, 1, 6)

local looked = redis.call('XPENDING', stream, GROUP, 'IDLE', tonumber(min_idle_ms), start, '+',
                          tonumber(page))
local dead, claimed, last = {}, {}, ''
for _, p in ipairs(looked) do
  if #claimed >= tonumber(max) then break end
  last = p[1]
  local owner = p[2]
  if dead[owner] == nil then
    dead[owner] = owner == consumer or redis.call('EXISTS', node_prefix .. owner) == 0
  end
  if dead[owner] then
    for _, e in ipairs(redis.call('XCLAIM', stream, GROUP, consumer, min_idle_ms, p[1])) do
      if e then claimed[#claimed + 1] = e end
    end
  end
end
return {last, claimed}
