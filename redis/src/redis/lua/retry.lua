-- retry (lua::Retry): while the task has retries left after its ended attempts (its attempts
-- on every node at most 1 + retries), records them and defers it until its backoff passes
-- (full jitter over base x multiplier^(n-1), at most max, n its attempts so far):
-- `retry_wait` in its hash with its entry's fields packed there and the attempts recorded
-- (`attempt:N` fields, N their numbers, as finish_batch.lua writes them), in one HSET; in the
-- later set at the due time, its entry acknowledged and deleted; answers 2. Else it writes nothing and answers 1:
-- the caller ends it, attempts and all (so a call sent again changes nothing twice). Answers
-- 3 for a task asked to cancel, 0 when the entry is no longer pending for the consumer.
local stream, later = KEYS[1], KEYS[2]
local entry, consumer, id, prefix, retries, now, base_ms, multiplier, max_ms, jitter =
    unpack(ARGV, 1, 10)
local first_attempt = 11  -- the ended attempts (encoded), from ARGV[11] on

if not pending_for(stream, entry, consumer) then return 0 end
local h = prefix .. 'task:' .. id
if redis.call('HGET', h, 'cancel') == '1' then return 3 end
local ended = #ARGV - first_attempt + 1
local so_far = tonumber(redis.call('HGET', h, 'attempts') or '0')
local n = so_far + ended
if n > tonumber(retries) then return 1 end
release_lease(h, id)
local ceiling = math.min(tonumber(max_ms), tonumber(base_ms) * tonumber(multiplier) ^ (n - 1))
local due = tonumber(now) + math.floor(tonumber(jitter) * ceiling)
local e = redis.call('XRANGE', stream, entry, entry)
local hash = {'state', 'retry_wait', 'deferred', cmsgpack.pack(e[1][2]), 'attempts',
              string.format('%d', n)}
for k = 1, ended do
  hash[#hash + 1] = 'attempt:' .. string.format('%d', so_far + k)
  hash[#hash + 1] = ARGV[first_attempt + k - 1]
end
redis.call('HSET', h, unpack(hash))
redis.call('ZADD', later, due, id)
redis.call('XACK', stream, GROUP, entry)
redis.call('XDEL', stream, entry)
return 2
