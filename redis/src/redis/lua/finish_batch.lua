-- finish_batch (lua::FinishBatch): ends a batch of the tasks this node holds (state
-- completed, dead_lettered, ...), each fenced on its own and its attempts recorded first; then
-- their entries acknowledged and deleted with one XACK and one XDEL per band, one ZADD into
-- the finished set, and the finished tasks past keep_finished evicted once for the batch; each
-- task's `end:` list told. Answers, per end in order, 1, or 0 when its entry is no longer
-- pending for the consumer (or came twice in the batch).
local done, letters = KEYS[1], KEYS[2]
local streams = {KEYS[3], KEYS[4], KEYS[5]}  -- q:1, q:0, q:-1
local consumer, prefix, keep_finished, keep_letters = unpack(ARGV, 1, 4)
local first_end, end_head = 5, 9  -- per end: its 9 fields below, then its attempts (encoded)

local out, acked, scores, seen, bytes = {}, {{}, {}, {}}, {}, {}, 0
local i = first_end
while i <= #ARGV do
  local id, entry, band, state, result, err, reason, now, attempts = unpack(ARGV, i, i + 8)
  local first_attempt, n = i + end_head, tonumber(attempts)
  i = first_attempt + n
  local s = 2 - tonumber(band)
  local stream = streams[s]
  if seen[s .. entry] or not pending_for(stream, entry, consumer) then
    out[#out + 1] = 0
  else
    seen[s .. entry] = true
    local h = prefix .. 'task:' .. id
    release_lease(h, id)
    if n > 0 then
      redis.call('RPUSH', h .. ':attempts', unpack(ARGV, first_attempt, first_attempt + n - 1))
      redis.call('HINCRBY', h, 'attempts', n)
    end
    if state == 'dead_lettered' then
      local e = redis.call('XRANGE', stream, entry, entry)
      local letter = {'MAXLEN', '~', keep_letters, '*'}
      if e[1] then for _, v in ipairs(e[1][2]) do letter[#letter + 1] = v end end
      for _, v in ipairs({'reason', reason, 'error', err, 'dead_lettered_ms', now,
                          'attempts', redis.call('HGET', h, 'attempts') or '0'}) do
        letter[#letter + 1] = v
      end
      redis.call('XADD', letters, unpack(letter))
    end
    local size = #result + #err
    bytes = bytes + size
    redis.call('HSET', h, 'state', state, 'result', result, 'error', err, 'reason', reason,
               'finished_ms', now, 'node', consumer, 'bytes', size)
    tell_end(prefix, id, state)
    local a = acked[s]
    a[#a + 1] = entry
    scores[#scores + 1] = now
    scores[#scores + 1] = id
    out[#out + 1] = 1
  end
end
for s = 1, 3 do
  if #acked[s] > 0 then
    redis.call('XACK', streams[s], GROUP, unpack(acked[s]))
    redis.call('XDEL', streams[s], unpack(acked[s]))
  end
end
if #scores == 0 then return out end
redis.call('INCRBY', done .. ':bytes', bytes)
redis.call('ZADD', done, unpack(scores))
local over = redis.call('ZCARD', done) - tonumber(keep_finished)
if over > 0 then
  local popped = redis.call('ZPOPMIN', done, over)
  for j = 1, #popped, 2 do
    local old = prefix .. 'task:' .. popped[j]
    local idem = redis.call('HGET', old, 'idem_key')
    if idem then redis.call('DEL', idem) end
    redis.call('DECRBY', done .. ':bytes', tonumber(redis.call('HGET', old, 'bytes') or '0'))
    redis.call('DEL', old, old .. ':attempts')
  end
end
return out
