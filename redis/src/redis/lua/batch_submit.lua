-- batch_submit (lua::BatchSubmit): a batch of up to 512 tasks of one band as ONE stream entry
-- of the band's batch stream (docs/redis-batch-layout.md): their ids taken with one INCRBY,
-- the entry's fields `v` (the layout's version), `batch` (the first id), `n` and `tasks` (the
-- packed tasks, batch::pack_tasks; passed through, unread: each node checks them when it
-- reads them), the batch's hash made and the batch indexed by its first id. Answers {the first
-- id, the entry id}.
local ids, stream, index = KEYS[1], KEYS[2], KEYS[3]
local prefix, pool, band, now, n, tasks = unpack(ARGV, 1, 6)
local count = tonumber(n)
if not count or count < 1 or count > 512 then
  return redis.error_reply('batch_submit: n must be 1 to 512')
end
local last = redis.call('INCRBY', ids, count)
local first = last - count + 1
-- string.format('%d') of a double: ids stay below 2^53, exact.
local first_s = string.format('%d', first)
local entry = redis.call('XADD', stream, '*', 'v', '1', 'batch', first_s, 'n', n, 'tasks', tasks)
redis.call('HSET', prefix .. pool .. ':batch:' .. first_s, 'n', n, 'entry', entry, 'band', band,
           'state', 'queued', 'submitted_ms', now)
redis.call('ZADD', index, first_s, first_s .. ':' .. pool)
return {first, entry}
