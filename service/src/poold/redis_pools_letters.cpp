// RedisPools (redis_pools.hpp): replay and purge of the Redis pools' dead letters, on the
// service's job thread (docs/redis-pools.md, "Dead letters: replay and purge").
#include <chrono>
#include <utility>

#include <sandpool/base/wall_clock.hpp>

#include <sandpool/service/redis_pools.hpp>

namespace sandpool::poold {
namespace {

redis::TaskProducer::LetterMatch match_of(const DeadLetterFilter& f) {
  redis::TaskProducer::LetterMatch m;
  m.type = f.type;
  if (f.reason) m.reason = std::string(to_string(*f.reason));
  m.task_id = f.task_id;
  m.from_ms = f.from_ms;
  m.until_ms = f.until_ms;
  return m;
}

}  // namespace

Result<redis::TaskProducer::LetterSweep> RedisPools::sweep(const std::string& pool,
                                                           const DeadLetterFilter& filter,
                                                           bool replay) {
  std::optional<redis::TaskProducer> stream;
  std::chrono::milliseconds max_timeout{0};
  {
    MutexLock lk(mu_);
    auto it = pools_.find(pool);
    if (it == pools_.end()) {
      return Status::error(Code::kNotFound, "no redis pool named '" + pool + "'");
    }
    stream.emplace(it->second->producer);
    max_timeout = it->second->local->max_timeout();
  }
  const redis::TaskProducer::LetterMatch m = match_of(filter);
  auto r = jobs_.with([&](redis::Connection& c) {
    return replay ? stream->replay_letters(c, m, wall_clock_ms(), max_timeout.count())
                  : stream->purge_letters(c, m);
  });
  if (!r) return unavailable(pool, r.status());
  if (!r->stopped) r->stopped = unavailable(pool, r->stopped);
  return r;
}

Result<redis::TaskProducer::LetterSweep> RedisPools::replay_letters(
    const std::string& pool, const DeadLetterFilter& filter) {
  return sweep(pool, filter, true);
}

Result<redis::TaskProducer::LetterSweep> RedisPools::purge_letters(const std::string& pool,
                                                                   const DeadLetterFilter& filter) {
  return sweep(pool, filter, false);
}

Result<std::vector<std::string>> RedisPools::letter_pools(std::uint64_t id) {
  auto named_pool = jobs_.with([&](redis::Connection& c) {
    return c.command({"HGET", opts_.prefix + "task:" + std::to_string(id), "pool"});
  });
  if (!named_pool) return unavailable("", named_pool.status());
  if (named_pool->is_error()) return named_pool->status();
  MutexLock lk(mu_);
  if (!named_pool->is_nil()) {
    if (pools_.count(named_pool->str) == 0) {
      return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is of redis pool '" +
                                                named_pool->str +
                                                "', which this node does not serve");
    }
    return std::vector<std::string>{named_pool->str};
  }
  std::vector<std::string> names;
  for (const auto& [name, a] : pools_) names.push_back(name);
  return names;
}

Result<std::uint64_t> RedisPools::replay_letter(std::uint64_t id) {
  auto names = letter_pools(id);
  if (!names) return names.status();
  DeadLetterFilter f;
  f.task_id = id;
  for (const std::string& name : *names) {
    auto r = sweep(name, f, true);
    if (!r) return r.status();
    if (!r->replayed.empty()) return r->replayed.front();
    if (!r->stopped) return r->stopped;
    if (r->refused != 0) return Status::invalid(r->first_refusal);
  }
  return Status::error(Code::kNotFound, "no dead letter of task " + std::to_string(id));
}

Result<std::uint64_t> RedisPools::purge_letter(std::uint64_t id) {
  auto names = letter_pools(id);
  if (!names) return names.status();
  DeadLetterFilter f;
  f.task_id = id;
  for (const std::string& name : *names) {
    auto r = sweep(name, f, false);
    if (!r) return r.status();
    if (r->purged != 0) return r->purged;
    if (!r->stopped) return r->stopped;
  }
  return std::uint64_t{0};
}

}  // namespace sandpool::poold
