// TaskUpkeep's rate limits (task_upkeep.hpp, "Rate limits"; docs/redis-pools.md): the token
// buckets every node of a Redis pool takes from, and the deferral of a task over one.
#include <algorithm>
#include <cmath>
#include <string>

#include <sandpool/redis/task_upkeep.hpp>

#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {

Result<TaskUpkeep::Taken> TaskUpkeep::take_tokens(Connection& c, const std::vector<Bucket>& buckets,
                                                  const std::optional<Cap>& cap,
                                                  const StreamEntry* held,
                                                  const std::string& consumer) const {
  Taken out;
  if (buckets.empty() && !cap) {
    out.taken = true;
    return out;
  }
  lua::TakeTokens a{.buckets = &buckets};
  if (cap)
    a.cap = {.key = cap->key, .max = cap->max, .task_id = cap->task_id, .prefix = keys_.prefix};
  if (held)
    a.fence = {.stream = keys_.stream_of(*held), .entry = held->entry_id, .consumer = consumer};
  auto r = lua::run(c, a);
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

Result<std::optional<std::int64_t>> TaskUpkeep::throttle(Connection& c, const StreamEntry& e,
                                                         const std::string& consumer,
                                                         const Bucket& worst, std::int64_t wait_ms,
                                                         std::int64_t now_ms) const {
  const double interval = static_cast<double>(std::max<std::int64_t>(1, worst.per_ms)) /
                          std::max<std::uint32_t>(1, worst.tasks);
  auto r = lua::run(c, lua::Throttle{.stream = keys_.stream_of(e),
                                     .later = keys_.later,
                                     .bucket = worst.key,
                                     .entry = e.entry_id,
                                     .consumer = consumer,
                                     .task_id = e.task_id,
                                     .prefix = keys_.prefix,
                                     .now_ms = now_ms,
                                     .wait_ms = wait_ms,
                                     .interval_ms = interval});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("throttle", *r);
  if (r->integer == 0) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(r->integer);
}

}  // namespace sandpool::redis
