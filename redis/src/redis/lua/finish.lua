-- finish (lua::Finish): ends a task this node holds (state completed, dead_lettered, ...),
-- its attempts recorded first; keeps at most keep_finished finished tasks. Answers 1, or 0
-- when the entry is no longer pending for the consumer.
local stream, done, letters = KEYS[1], KEYS[2], KEYS[3]
local entry, consumer, id, prefix, state, result, err, reason, now, keep_finished, keep_letters =
    unpack(ARGV, 1, 11)
local first_attempt = 12  -- the attempts to record first (encoded), from ARGV[12] on

if not pending_for(stream, entry, consumer) then return 0 end
local h = prefix .. 'task:' .. id
release_lease(h, id)
if #ARGV >= first_attempt then
  redis.call('RPUSH', h .. ':attempts', unpack(ARGV, first_attempt))
  redis.call('HINCRBY', h, 'attempts', #ARGV - first_attempt + 1)
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
local bytes = #result + #err
redis.call('HSET', h, 'state', state, 'result', result, 'error', err, 'reason', reason,
           'finished_ms', now, 'node', consumer, 'bytes', bytes)
redis.call('INCRBY', done .. ':bytes', bytes)
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
redis.call('ZADD', done, now, id)
local over = redis.call('ZCARD', done) - tonumber(keep_finished)
if over > 0 then
  local popped = redis.call('ZPOPMIN', done, over)
  for i = 1, #popped, 2 do
    local old = prefix .. 'task:' .. popped[i]
    local idem = redis.call('HGET', old, 'idem_key')
    if idem then redis.call('DEL', idem) end
    redis.call('DECRBY', done .. ':bytes', tonumber(redis.call('HGET', old, 'bytes') or '0'))
    redis.call('DEL', old, old .. ':attempts')
  end
end
tell_end(prefix, id, state)
return 1
