// TaskStream's rate limits (task_stream.hpp, "Rate limits"; docs/redis-pools.md): the token
// buckets every node of a Redis pool takes from, and the deferral of a task over one.
#include <algorithm>
#include <cmath>
#include <string>

#include "redis/task_stream.hpp"

#include "redis/reply_checks.hpp"

namespace sandpool::redis {
namespace {

// KEYS: the buckets, then the cap's lease set when there is a cap. ARGV: the number of buckets,
// per bucket its tasks, per (ms) and burst; then, with a cap: its max, the task's id and the
// prefix. The cap comes first: a task that holds no lease while the set holds `max` gets
// {0, 100, the cap's index (from 1)}: it is tried again 100 ms later. Each bucket is a hash:
// `tokens` (fractional) and `at` (when they were counted, in µs of Redis's clock). Refills
// each at tasks/per up to its burst; takes one from each (and the lease) when every one holds
// a whole token ({1, 0, 0}); else takes none and answers {0, the wait in ms until the bucket
// furthest from a token has one, that bucket's index (from 1)}. A bucket idle long enough to
// be full expires.
const Script kTakeTokens{"take_tokens", R"(
local buckets = tonumber(ARGV[1])
local cap, id = nil, nil
if #KEYS > buckets then
  cap, id = KEYS[#KEYS], ARGV[#ARGV - 1]
  if redis.call('SISMEMBER', cap, id) == 0 and
     redis.call('SCARD', cap) >= tonumber(ARGV[#ARGV - 2]) then
    return {0, 100, #KEYS}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local level, wait, worst = {}, 0, 0
for i = 1, buckets do
  local tasks, per, burst = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]) * 1000,
                            tonumber(ARGV[3 * i + 1])
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens or not at then tokens, at = burst, now end
  if now > at then tokens = tokens + (now - at) * tasks / per end
  tokens = math.min(burst, tokens)
  level[i] = tokens
  if tokens < 1 then
    local w = math.ceil((1 - tokens) * per / tasks / 1000)
    if w > wait or worst == 0 then wait, worst = w, i end
  end
end
if worst > 0 then return {0, wait, worst} end
if cap then
  redis.call('SADD', cap, id)
  redis.call('HSET', ARGV[#ARGV] .. 'task:' .. id, 'lease', cap)
end
for i = 1, buckets do
  local tasks, per, burst = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]),
                            tonumber(ARGV[3 * i + 1])
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.6f', level[i] - 1),
             'at', string.format('%.0f', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(burst * per / tasks) + 1000)
end
return {1, 0, 0}
)"};

// KEYS: stream, later, the bucket that held the task back. ARGV: entry, consumer, task id,
// prefix, now_ms, wait_ms, the bucket's interval between tokens (ms). Fenced as the scripts
// of task_stream.cpp are (the entry pending for this consumer). The task goes to the later
// set, as kDefer puts a retry there, but stays `queued` and counts no attempt. `wake` in the
// bucket's hash is the last due time it gave: the next is at least one interval after it.
const Script kThrottle{"throttle", R"(
local pending = redis.call('XPENDING', KEYS[1], 'sandpool', ARGV[1], ARGV[1], 1, ARGV[2])
if #pending == 0 then return 0 end
local now = tonumber(ARGV[5])
local due = now + tonumber(ARGV[6])
local wake = tonumber(redis.call('HGET', KEYS[3], 'wake') or '0')
if wake + tonumber(ARGV[7]) > due then due = wake + tonumber(ARGV[7]) end
redis.call('HSET', KEYS[3], 'wake', string.format('%.3f', due))
local ttl = redis.call('PTTL', KEYS[3])
if ttl < due - now + 1000 then redis.call('PEXPIRE', KEYS[3], math.ceil(due - now) + 1000) end
local h = ARGV[4] .. 'task:' .. ARGV[3]
local lease = redis.call('HGET', h, 'lease')  -- a claimed task's, kept from its dead node
if lease then
  redis.call('SREM', lease, ARGV[3])
  redis.call('HDEL', h, 'lease')
end
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if e[1] then
  redis.call('HSET', h, 'state', 'queued', 'deferred', cmsgpack.pack(e[1][2]))
  redis.call('HINCRBY', h, 'throttled', 1)
  redis.call('ZADD', KEYS[2], math.floor(due), ARGV[3])
end
redis.call('XACK', KEYS[1], 'sandpool', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return math.max(1, math.floor(due))
)"};

}  // namespace

std::string TaskStream::rate_key(const std::string& kind, const std::string& name) const {
  return prefix_ + pool_ + ":rate:" + kind + (name.empty() ? "" : ":" + name);
}

std::string TaskStream::cap_key(const std::string& type) const {
  return prefix_ + pool_ + ":running:" + type;
}

Result<TaskStream::Taken> TaskStream::take_tokens(Connection& c, const std::vector<Bucket>& buckets,
                                                  const std::optional<Cap>& cap) const {
  Taken out;
  if (buckets.empty() && !cap) {
    out.taken = true;
    return out;
  }
  std::vector<std::string> keys, args = {std::to_string(buckets.size())};
  for (const Bucket& b : buckets) {
    keys.push_back(b.key);
    args.push_back(std::to_string(std::max<std::uint32_t>(1, b.tasks)));
    args.push_back(std::to_string(std::max<std::int64_t>(1, b.per_ms)));
    args.push_back(std::to_string(std::max<std::uint32_t>(1, b.burst)));
  }
  if (cap) {
    keys.push_back(cap->key);
    args.insert(args.end(), {std::to_string(std::max<std::uint32_t>(1, cap->max)),
                             std::to_string(cap->task_id), prefix_});
  }
  auto r = c.eval(kTakeTokens, keys, args);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 3) return unexpected("take_tokens", *r);
  out.taken = r->elements[0].integer == 1;
  out.wait_ms = r->elements[1].integer;
  out.worst = static_cast<std::size_t>(std::max<std::int64_t>(1, r->elements[2].integer)) - 1;
  if (out.worst > buckets.size() || (out.worst == buckets.size() && !cap)) {
    return unexpected("take_tokens", *r);
  }
  return out;
}

Result<std::optional<std::int64_t>> TaskStream::throttle(Connection& c, const StreamEntry& e,
                                                         const std::string& consumer,
                                                         const Bucket& worst, std::int64_t wait_ms,
                                                         std::int64_t now_ms) const {
  const double interval = static_cast<double>(std::max<std::int64_t>(1, worst.per_ms)) /
                          std::max<std::uint32_t>(1, worst.tasks);
  auto r = c.eval(kThrottle, {stream_of(e), later_, worst.key},
                  {e.entry_id, consumer, std::to_string(e.task_id), prefix_, std::to_string(now_ms),
                   std::to_string(wait_ms), std::to_string(interval)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("throttle", *r);
  if (r->integer == 0) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(r->integer);
}

}  // namespace sandpool::redis
