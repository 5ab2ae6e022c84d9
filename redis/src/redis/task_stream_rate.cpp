// TaskStream's rate limits (task_stream.hpp, "Rate limits"; docs/redis-pools.md): the token
// buckets every node of a Redis pool takes from, and the deferral of a task over one.
#include <algorithm>
#include <cmath>
#include <string>

#include <sandpool/redis/task_stream.hpp>

#include "redis/reply_checks.hpp"

namespace sandpool::redis {
namespace {

// KEYS: the buckets, then the cap's lease set when there is a cap, then the held entry's
// stream when fenced. ARGV: the number of buckets, 1 with a cap (else 0), the held entry's id
// and consumer ('' when unfenced); per bucket its tasks, per (ms) and burst; then, with a cap:
// its max, the task's id and the prefix. Fenced: an entry no longer pending for the consumer
// (another node claimed it while this one stalled; it may have ended it) takes nothing and
// answers {-1, 0, 0}, so a stale node neither spends tokens nor leaves a lease no end gives
// back. The cap comes next: a task that holds no lease while the set holds `max` gets {0, 100,
// the cap's index (from 1)}: it is tried again 100 ms later. Each bucket is a hash: `tokens`
// (fractional) and `at` (when they were counted, in µs of Redis's clock). Refills each at
// tasks/per up to its burst; takes one from each (and the lease) when every one holds a whole
// token ({1, 0, 0}); else takes none and answers {0, the wait in ms until the bucket furthest
// from a token has one, that bucket's index (from 1)}. A bucket idle long enough to be full
// expires.
const Script kTakeTokens{"take_tokens", R"(
local buckets = tonumber(ARGV[1])
local has_cap = ARGV[2] == '1'
local base = 4  -- the first bucket's first argument
if ARGV[3] ~= '' then
  local stream = KEYS[buckets + (has_cap and 2 or 1)]
  if #redis.call('XPENDING', stream, 'sandpool', ARGV[3], ARGV[3], 1, ARGV[4]) == 0 then
    return {-1, 0, 0}
  end
end
local cap, id, cap_max, prefix = nil, nil, nil, nil
if has_cap then
  local at = base + 1 + 3 * buckets
  cap, cap_max, id, prefix = KEYS[buckets + 1], tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2]
  if redis.call('SISMEMBER', cap, id) == 0 and redis.call('SCARD', cap) >= cap_max then
    return {0, 100, buckets + 1}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local level, wait, worst = {}, 0, 0
for i = 1, buckets do
  local a = base + 1 + 3 * (i - 1)
  local tasks, per, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1]) * 1000, tonumber(ARGV[a + 2])
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
  redis.call('HSET', prefix .. 'task:' .. id, 'lease', cap)
end
for i = 1, buckets do
  local a = base + 1 + 3 * (i - 1)
  local tasks, per, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.6f', level[i] - 1),
             'at', string.format('%.0f', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(burst * per / tasks) + 1000)
end
return {1, 0, 0}
)"};

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
                                                  const std::optional<Cap>& cap,
                                                  const StreamEntry* held,
                                                  const std::string& consumer) const {
  Taken out;
  if (buckets.empty() && !cap) {
    out.taken = true;
    return out;
  }
  std::vector<std::string> keys, args = {std::to_string(buckets.size()), cap ? "1" : "0",
                                         held ? held->entry_id : "", held ? consumer : ""};
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
  if (held) keys.push_back(stream_of(*held));
  auto r = c.eval(kTakeTokens, keys, args);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 3) return unexpected("take_tokens", *r);
  if (r->elements[0].integer < 0) {
    out.not_yours = true;
    return out;
  }
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
