-- batch_take (lua::BatchTake): the batch entries a node just read (or claimed), taken by the
-- consumer, each fenced on its own (still pending for it): the batch's hash says `running` on
-- the consumer and counts the take. Answers per entry, in order, 0 when it is not the
-- consumer's, else the batch's end map (a bit per task that has an end record, task i at bit
-- i % 8 of byte i // 8; '' when none): a claimed batch re-runs only the tasks with none.
local stream_of = {['1'] = KEYS[1], ['0'] = KEYS[2], ['-1'] = KEYS[3]}
local prefix, pool, consumer = unpack(ARGV, 1, 3)
-- Then per entry: its band, entry id and first task id.
local out = {}
for i = 4, #ARGV - 2, 3 do
  local stream, entry, first = stream_of[ARGV[i]], ARGV[i + 1], ARGV[i + 2]
  if not stream or not pending_for(stream, entry, consumer) then
    out[#out + 1] = 0
  else
    local h = prefix .. pool .. ':batch:' .. first
    redis.call('HSET', h, 'state', 'running', 'node', consumer)
    redis.call('HINCRBY', h, 'takes', 1)
    out[#out + 1] = redis.call('HGET', h, 'endmap') or ''
  end
end
return out
