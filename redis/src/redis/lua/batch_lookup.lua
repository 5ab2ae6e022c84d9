-- batch_lookup (lua::BatchLookup): task `id` found through the batch index: the batch whose
-- first id is the highest at or below it, if the task is one of its `n`. Answers {} when no
-- batch holds it, else {pool, first, n, state, node, entry, submitted_ms, its end record or
-- ''}: the record found by walking the batch's ends string (each record's length checked
-- against what is left; the caller unpacks the one answered, bounds-checked again).
local index = KEYS[1]
local prefix, id = ARGV[1], ARGV[2]
local m = redis.call('ZREVRANGEBYSCORE', index, id, '-inf', 'LIMIT', 0, 1)
if #m == 0 then return {} end
local colon = string.find(m[1], ':', 1, true)
if not colon then return {} end
local first_s, pool = string.sub(m[1], 1, colon - 1), string.sub(m[1], colon + 1)
local h = prefix .. pool .. ':batch:' .. first_s
local f = redis.call('HMGET', h, 'n', 'state', 'node', 'entry', 'submitted_ms')
local n, first, want = tonumber(f[1]), tonumber(first_s), tonumber(id)
if not n or not first or not want or want - first >= n then return {} end
local index_of = want - first
local record = ''
local blob = redis.call('GET', h .. ':ends')
if blob then
  local pos, len_blob = 1, #blob
  while pos + 6 <= len_blob do
    local b1, b2, b3, b4, _, i1, i2 = string.byte(blob, pos, pos + 6)
    local len = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
    if pos + 3 + len > len_blob then break end
    if i1 + i2 * 256 == index_of then
      record = string.sub(blob, pos, pos + 3 + len)
      break
    end
    pos = pos + 4 + len
  end
end
return {pool, first_s, f[1], f[2] or '', f[3] or '', f[4] or '', f[5] or '', record}
