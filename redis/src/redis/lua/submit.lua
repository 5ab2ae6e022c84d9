-- submit (lua::Submit): a task into its band's stream, or the later set when it is not due.
-- Answers {id, 1}, or {the first task's id, 0} when the idempotency key names one.
local ids, stream, idem, later = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, pool, now, task_type, not_before, band = unpack(ARGV, 1, 6)
local first_field = 7  -- then the entry's field/value pairs

if idem ~= '' then
  local first = redis.call('GET', idem)
  if first then return {tonumber(first), 0} end
end
local id = add_task({ids = ids, later = later, prefix = prefix, pool = pool, now = now}, stream,
                    idem, task_type, not_before, band, ARGV, first_field)
return {tonumber(id), 1}
