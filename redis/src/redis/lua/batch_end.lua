-- batch_end (lua::BatchEnd): end records (batch::pack_end) of tasks of one batch appended to
-- its ends string, fenced once for the call (the batch's entry still pending for the
-- consumer). The records are checked whole before anything is written: each one's length
-- within the blob, at least a record's fixed part and at most 64 KiB (batch::kMaxEndBytes),
-- version 1, its index below the batch's
-- `n`; a blob that fails is an error reply and writes nothing. A record whose task already has
-- one (its bit set in the end map) is skipped. When every task of the batch has a record the
-- entry is acknowledged and deleted, the batch marked `ended` and added to the finished set.
-- Answers {1, acked (0/1), then per record 1 written or 0 skipped}, or {0} when the entry is
-- not the consumer's.
local stream, h, ends, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local consumer, entry, first, now, blob = unpack(ARGV, 1, 5)

if not pending_for(stream, entry, consumer) then return {0} end
local f = redis.call('HMGET', h, 'n', 'endmap', 'ended')
local n = tonumber(f[1])
if not n then return redis.error_reply('batch_end: no batch ' .. h) end
local ended = tonumber(f[3] or '0') or 0

-- The end map as bytes, one per 8 tasks.
local map = {string.byte(f[2] or '', 1, -1)}
for k = #map + 1, math.floor((n + 7) / 8) do map[k] = 0 end

-- One pass over the records: each checked, its task's bit tested and set in `map` (a Lua
-- table: nothing reaches Redis before the whole blob passed).
local BIT = {1, 2, 4, 8, 16, 32, 64, 128}
local byte_at = string.byte  -- a local: not two table lookups a record
local out, n_out, added, skipped = {1, 0}, 2, 0, nil
local pos, len_blob = 1, #blob
while pos <= len_blob do
  if pos + 6 > len_blob then return redis.error_reply('batch_end: a record truncated') end
  local b1, b2, b3, b4, version, i1, i2 = byte_at(blob, pos, pos + 6)
  local len = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
  if len < 28 or len > 65536 or pos + 3 + len > len_blob then
    return redis.error_reply('batch_end: a record\'s length is out of bounds')
  end
  if version ~= 1 then return redis.error_reply('batch_end: a record of another version') end
  local index = i1 + i2 * 256
  if index >= n then return redis.error_reply('batch_end: an index past the batch') end
  local low = index % 8
  local at, bit = (index - low) / 8 + 1, BIT[low + 1]
  local m = map[at]
  n_out = n_out + 1
  if m % (bit + bit) >= bit then
    out[n_out] = 0  -- its task has a record
    skipped = skipped or {}
    skipped[pos] = true
  else
    map[at] = m + bit
    added = added + 1
    out[n_out] = 1
  end
  pos = pos + 4 + len
end

if added > 0 then
  local kept = blob
  if skipped then  -- the records written, without those skipped
    local parts = {}
    pos = 1
    while pos <= len_blob do
      local b1, b2, b3, b4 = string.byte(blob, pos, pos + 3)
      local stop = pos + 3 + b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
      if not skipped[pos] then parts[#parts + 1] = string.sub(blob, pos, stop) end
      pos = stop + 1
    end
    kept = table.concat(parts)
  end
  ended = ended + added
  redis.call('APPEND', ends, kept)
  redis.call('HSET', h, 'endmap', string.char(unpack(map)), 'ended', ended)
end
if ended >= n then
  redis.call('XACK', stream, GROUP, entry)
  redis.call('XDEL', stream, entry)
  redis.call('HSET', h, 'state', 'ended', 'finished_ms', now)
  redis.call('ZADD', done, now, first)
  out[2] = 1
end
return out
