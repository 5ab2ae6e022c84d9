// TaskStream (task_stream.hpp): replay and purge of a pool's dead letters, script `letters`
// (docs/redis-pools.md, "Dead letters: replay and purge").
#include <algorithm>
#include <charconv>
#include <type_traits>
#include <utility>

#include <sandpool/redis/task_stream.hpp>

#include "redis/reply_checks.hpp"

namespace sandpool::redis {

namespace {

// KEYS: dead letters, done, then the bands' streams q:1, q:0, q:-1. ARGV: prefix, pool, action
// ('replay' or 'purge'), order
// ('fwd': XRANGE from..to, 'rev': XREVRANGE from..to), from, to, count, the most matches (0:
// any number), now_ms, max_timeout_ms, then the filter ('' any): type, reason, task id,
// from_ms, until_ms. Answers {next ('' when the sweep is done, else the exclusive bound to go
// on from), purged, {replayed ids}, {id, why, ...} of the letters a replay left}.
const Script kLetters{"letters", R"(
local range
if ARGV[4] == 'rev' then
  range = redis.call('XREVRANGE', KEYS[1], ARGV[5], ARGV[6], 'COUNT', ARGV[7])
else
  range = redis.call('XRANGE', KEYS[1], ARGV[5], ARGV[6], 'COUNT', ARGV[7])
end
local own = {reason = true, error = true, dead_lettered_ms = true, attempts = true}
local max, matched, purged, replayed, refused = tonumber(ARGV[8]), 0, 0, {}, {}
local last = nil
for _, e in ipairs(range) do
  if max > 0 and matched >= max then break end
  last = e[1]
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local at = tonumber(f.dead_lettered_ms or '')
  if (ARGV[11] == '' or f.type == ARGV[11]) and (ARGV[12] == '' or f.reason == ARGV[12])
      and (ARGV[13] == '' or f.id == ARGV[13])
      and (ARGV[14] == '' or (at ~= nil and at >= tonumber(ARGV[14])))
      and (ARGV[15] == '' or (at ~= nil and at < tonumber(ARGV[15]))) then
    matched = matched + 1
    if ARGV[3] == 'purge' then
      purged = purged + redis.call('XDEL', KEYS[1], e[1])
    else
      local h = ARGV[1] .. 'task:' .. (f.id or '')
      local why = nil
      if not f.id or not f.type or f.type == '' then
        why = 'letter ' .. e[1] .. ' is not a task (no id or type)'
      else
        local state = redis.call('HGET', h, 'state')
        if state and state ~= 'dead_lettered' and state ~= 'completed' and state ~= 'cancelled' then
          why = 'task ' .. f.id .. ' is live (' .. state .. '): its letter was left'
        elseif f.timeout_ms and tonumber(f.timeout_ms) and
            tonumber(f.timeout_ms) > tonumber(ARGV[10]) then
          why = 'task ' .. f.id .. ': timeout_ms ' .. f.timeout_ms ..
                ' is over the pool\'s max_timeout (' .. ARGV[10] .. ' ms): its letter was left'
        end
      end
      if why then
        refused[#refused + 1] = f.id or '?'
        refused[#refused + 1] = why
      else
        local fields = {}
        for i = 1, #e[2], 2 do
          if not own[e[2][i]] then
            fields[#fields + 1] = e[2][i]
            fields[#fields + 1] = e[2][i + 1]
          end
        end
        local priority = tonumber(f.priority or '0') or 0
        local band = priority > 0 and 1 or (priority < 0 and -1 or 0)
        local entry = redis.call('XADD', KEYS[4 - band], '*', unpack(fields))
        redis.call('XDEL', KEYS[1], e[1])
        if redis.call('ZREM', KEYS[2], f.id) == 1 then  -- no longer a kept finished task
          redis.call('DECRBY', KEYS[2] .. ':bytes', tonumber(redis.call('HGET', h, 'bytes') or '0'))
        end
        redis.call('DEL', h .. ':attempts')
        redis.call('HDEL', h, 'result', 'error', 'reason', 'finished_ms', 'node', 'cancel',
                   'deferred', 'idem_key', 'not_before_ms', 'tenant', 'bytes', 'lease',
                   'refusals')  -- a replayed `rejected` task starts its count again
        redis.call('HSET', h, 'state', 'queued', 'pool', ARGV[2], 'type', f.type,
                   'submitted_ms', ARGV[9], 'entry', entry, 'attempts', 0, 'band', band)
        if f.tenant then redis.call('HSET', h, 'tenant', f.tenant) end
        if f.idem then
          -- The key names this task again, unless another task took it since.
          local k = ARGV[1] .. 'idem:' .. f.idem
          if redis.call('SET', k, f.id, 'NX') or redis.call('GET', k) == f.id then
            redis.call('HSET', h, 'idem_key', k)
          end
        end
        replayed[#replayed + 1] = f.id
      end
    end
  end
end
local cursor = ''
if #range == tonumber(ARGV[7]) and not (max > 0 and matched >= max) then cursor = '(' .. last end
return {cursor, purged, replayed, refused}
)"};

}  // namespace

Result<TaskStream::LetterSweep> TaskStream::replay_letters(Connection& c, const LetterMatch& m,
                                                           std::int64_t now_ms,
                                                           std::int64_t max_timeout_ms,
                                                           std::size_t chunk) const {
  return sweep_letters(c, true, m, now_ms, max_timeout_ms, chunk);
}

Result<TaskStream::LetterSweep> TaskStream::purge_letters(Connection& c, const LetterMatch& m,
                                                          std::size_t chunk) const {
  return sweep_letters(c, false, m, 0, 0, chunk);
}

Result<TaskStream::LetterSweep> TaskStream::sweep_letters(Connection& c, bool replay,
                                                          const LetterMatch& m, std::int64_t now_ms,
                                                          std::int64_t max_timeout_ms,
                                                          std::size_t chunk) const {
  LetterSweep out;
  const bool by_id = m.task_id.has_value();
  std::string from = by_id ? "+" : "-";
  std::string to = by_id ? "-" : "";
  if (!by_id) {
    // Up to the newest letter now: what dies after the sweep began is not swept.
    auto newest = c.command({"XREVRANGE", letters_, "+", "-", "COUNT", "1"});
    if (!newest) return newest.status();  // nothing swept yet
    if (newest->is_error()) return newest->status();
    if (newest->elements.empty()) return out;
    if (newest->elements[0].elements.size() != 2) return unexpected("XREVRANGE", *newest);
    to = newest->elements[0].elements[0].str;
  }
  const auto text = [](const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(*v)>, std::string>) {
      return v ? *v : std::string();
    } else {
      return v ? std::to_string(*v) : std::string();
    }
  };
  std::vector<std::string> args = {prefix_,
                                   pool_,
                                   replay ? "replay" : "purge",
                                   by_id ? "rev" : "fwd",
                                   from,
                                   to,
                                   std::to_string(std::max<std::size_t>(1, chunk)),
                                   by_id ? "1" : "0",
                                   std::to_string(now_ms),
                                   std::to_string(max_timeout_ms),
                                   text(m.type),
                                   text(m.reason),
                                   text(m.task_id),
                                   text(m.from_ms),
                                   text(m.until_ms)};
  while (true) {
    auto r =
        c.eval(kLetters, {letters_, done_, stream_key(1), stream_key(0), stream_key(-1)}, args);
    // Stopped part way: what the chunks before did is the answer, with why it stopped.
    if (!r || r->is_error()) {
      out.stopped = r ? r->status() : r.status();
      return out;
    }
    if (r->elements.size() != 4 || r->elements[1].type != Reply::Type::kInteger) {
      out.stopped = unexpected("letters", *r);
      return out;
    }
    out.purged += static_cast<std::uint64_t>(std::max<std::int64_t>(0, r->elements[1].integer));
    for (const Reply& id : r->elements[2].elements) {
      std::uint64_t n = 0;
      if (!parse_number(id.str, &n)) {
        out.stopped = unexpected("letters", *r);
        return out;
      }
      out.replayed.push_back(n);
    }
    const auto& refused = r->elements[3].elements;
    for (std::size_t i = 0; i + 1 < refused.size(); i += 2) {
      if (out.refused++ == 0) out.first_refusal = refused[i + 1].str;
    }
    if (r->elements[0].str.empty()) return out;
    args[4] = r->elements[0].str;
  }
}

}  // namespace sandpool::redis
