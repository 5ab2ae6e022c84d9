-- claim_slot (lua::ClaimSlot): a schedule's slot (TaskProducer::claim_slot), the claim and the
-- submit in one script, so no crash comes between them. Answers {task id, 1 (won) or 0
-- (lost), node}, or {last task, 2, the pausing node} while the claim hash holds the schedule
-- paused.
local ids, stream, idem, later, claim = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, pool, now, task_type, not_before, band, slot_s, node, max_lead_s = unpack(ARGV, 1, 9)
local first_field = 10  -- then the entry's field/value pairs

local slot = tonumber(slot_s)
if slot > tonumber(redis.call('TIME')[1]) + tonumber(max_lead_s) then
  return redis.error_reply('slot ' .. slot_s .. ' is ahead of redis clock by more than ' ..
                           max_lead_s .. ' s: the node clock runs ahead')
end
local held = redis.call('HMGET', claim, 'slot', 'task', 'node', 'paused')
if held[4] then return {tonumber(held[2]) or 0, 2, held[4]} end
if held[1] and tonumber(held[1]) and tonumber(held[1]) >= slot then
  return {tonumber(held[2]) or 0, 0, held[3] or ''}
end
if idem ~= '' then
  local first = redis.call('GET', idem)
  if first then
    redis.call('HSET', claim, 'slot', slot_s, 'task', first, 'node', '')
    return {tonumber(first), 0, ''}
  end
end
local id = add_task({ids = ids, later = later, prefix = prefix, pool = pool, now = now}, stream,
                    idem, task_type, not_before, band, ARGV, first_field)
redis.call('HSET', claim, 'slot', slot_s, 'task', id, 'node', node, 'claimed_ms', now)
return {tonumber(id), 1, node}
