// TaskUpkeep (task_upkeep.hpp): the consumer group, a node's heartbeat key, the due tasks
// moved back, the finished tasks trimmed.
#include <sandpool/redis/task_upkeep.hpp>

#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {

Status TaskUpkeep::ensure_group(Connection& c) const {
  for (const std::string& stream : keys_.streams) {
    auto r = c.command({"XGROUP", "CREATE", stream, PoolKeys::kGroup, "0", "MKSTREAM"});
    if (!r) return r.status();
    if (r->is_error() && r->str.rfind("BUSYGROUP", 0) != 0) return r->status();
  }
  auto ids = c.command({"SET", keys_.ids, std::to_string(PoolKeys::kFirstId - 1), "NX"});
  if (!ids) return ids.status();
  return ids->status();
}

Result<std::optional<std::string>> TaskUpkeep::beat(Connection& c, const std::string& prefix,
                                                    const std::string& name,
                                                    const std::string& identity,
                                                    std::chrono::milliseconds ttl) {
  const std::string node_key = prefix + "node:" + name;
  auto r =
      lua::run(c, lua::Beat{.node_key = node_key, .identity = identity, .ttl_ms = ttl.count()});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type == Reply::Type::kInteger) return std::optional<std::string>();
  return std::optional<std::string>(r->str);
}

Result<std::size_t> TaskUpkeep::move_due(Connection& c, std::int64_t now_ms,
                                         std::size_t max) const {
  auto r = lua::run(c, lua::MoveDue{.later = keys_.later,
                                    .streams = keys_.streams,
                                    .done = keys_.done,
                                    .prefix = keys_.prefix,
                                    .now_ms = now_ms,
                                    .max = max});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("move_due", *r);
  return static_cast<std::size_t>(r->integer);
}

Result<std::size_t> TaskUpkeep::trim_finished(Connection& c, std::int64_t now_ms,
                                              std::size_t max) const {
  auto r = lua::run(c, lua::TrimFinished{.done = keys_.done,
                                         .done_bytes = keys_.done_bytes,
                                         .prefix = keys_.prefix,
                                         .oldest_kept_ms = now_ms - finished_max_age_ms_,
                                         .max_bytes = finished_max_bytes_,
                                         .max_evicted = max});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("trim_finished", *r);
  return static_cast<std::size_t>(r->integer);
}

}  // namespace sandpool::redis
