// TaskProducer's reads (task_producer.hpp): a task's hash and state, the pool's dead letters, and
// the summary `status` shows. None of them changes a key.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include <sandpool/redis/task_producer.hpp>

#include "redis/redis_feeder_threads.hpp"
#include "redis/reply_checks.hpp"

namespace sandpool::redis {
namespace {

// The fields of a task's hash that finish_batch.lua, retry.lua and attempt.lua write per
// attempt (`attempt:N`) and per end (`end:ENTRY`).
constexpr std::string_view kAttemptField = "attempt:", kEndMark = "end:";

}  // namespace

Result<std::vector<TaskProducer::Letter>> TaskProducer::dead_letters(
    Connection& c, std::size_t max, const std::string& before) const {
  auto r = c.command({"XREVRANGE", keys_.letters, before.empty() ? "+" : "(" + before, "-", "COUNT",
                      std::to_string(max)});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  std::vector<Letter> out;
  for (const Reply& entry : r->elements) {
    if (entry.elements.size() != 2) return unexpected("XREVRANGE", *r);
    out.emplace_back().entry_id = entry.elements[0].str;
    auto& fields = out.back().fields;
    const auto& f = entry.elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) fields.emplace_back(f[i].str, f[i + 1].str);
  }
  return out;
}

Result<std::optional<std::string>> TaskProducer::task_state(Connection& c, std::uint64_t id) const {
  auto r = c.command({"HGET", keys_.task_key(id), "state"});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->is_nil()) return std::optional<std::string>{};
  if (r->type != Reply::Type::kString) return unexpected("task_state", *r);
  return std::optional<std::string>(r->str);
}

std::vector<std::vector<std::string>> TaskProducer::task_reads(std::uint64_t id) const {
  const std::string h = keys_.task_key(id);
  return {{"HGETALL", h}, {"LRANGE", h + ":attempts", "0", "-1"}};
}

Result<StoredTask> TaskProducer::task(Connection& c, std::uint64_t id) const {
  SP_RETURN_IF_ERROR(append_task_reads(c, id));
  return read_task(c, id);
}

Status TaskProducer::append_task_reads(Connection& c, std::uint64_t id) const {
  for (const auto& r : task_reads(id)) SP_RETURN_IF_ERROR(c.append(r));
  return Status::ok();
}

Result<StoredTask> TaskProducer::read_task(Connection& c, std::uint64_t id) const {
  auto all = c.read();
  auto history = c.read();  // both read, so that the pipeline stays in step
  if (!all) return all.status();
  if (all->is_error()) return all->status();
  if (!history) return history.status();
  if (history->is_error()) return history->status();
  if (all->elements.empty()) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  auto t = stored_task(id, *all, *history);
  if (!t) return unexpected("HGETALL", *all);
  return std::move(*t);
}

std::optional<StoredTask> TaskProducer::stored_task(std::uint64_t id, const Reply& hash,
                                                    const Reply& attempts) {
  if (hash.type != Reply::Type::kArray || hash.elements.empty()) return std::nullopt;
  if (attempts.type != Reply::Type::kArray) return std::nullopt;
  StoredTask t;
  t.id = id;
  std::uint32_t ends = 0, end_marks = 0;
  std::vector<std::pair<std::uint64_t, const std::string*>> numbered;  // `attempt:N` fields
  const auto& f = hash.elements;
  for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i].str;
    const std::string& v = f[i + 1].str;
    if (k == "pool")
      t.pool = v;
    else if (k == "type")
      t.type = v;
    else if (k == "state")
      t.state = v;
    else if (k == "result")
      t.result = v;
    else if (k == "error")
      t.error = v;
    else if (k == "reason")
      t.reason = v;
    else if (k == "node")
      t.node = v;
    else if (k == "entry")
      t.entry_id = v;
    else if (k == "attempts")
      (void)parse_number(v, &t.attempts);
    else if (k == "submitted_ms")
      (void)parse_number(v, &t.submitted_ms);
    else if (k == "finished_ms")
      (void)parse_number(v, &t.finished_ms);
    else if (k == "not_before_ms")
      (void)parse_number(v, &t.not_before_ms);
    else if (k == "tenant")
      t.tenant = v;
    else if (k == "ends")
      (void)parse_number(v, &ends);
    else if (k.starts_with(kEndMark))
      ++end_marks;
    else if (std::uint64_t n = 0;
             k.starts_with(kAttemptField) && parse_number(k.substr(kAttemptField.size()), &n))
      numbered.emplace_back(n, &v);
  }
  t.ends = ends + end_marks;
  for (const Reply& a : attempts.elements) t.history.push_back(a.str);
  std::sort(numbered.begin(), numbered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [n, a] : numbered) t.history.push_back(feeder::stored_as_json(*a));
  return t;
}

Result<TaskProducer::Summary> TaskProducer::summary(Connection& c) const {
  std::vector<std::vector<std::string>> asks = {
      {"ZCARD", keys_.later}, {"ZCARD", keys_.done}, {"XLEN", keys_.letters}};
  for (const std::string& stream : keys_.streams) {
    asks.push_back({"XLEN", stream});
    asks.push_back({"XPENDING", stream, PoolKeys::kGroup});
    asks.push_back({"XINFO", "CONSUMERS", stream, PoolKeys::kGroup});
  }
  for (const auto& a : asks) SP_RETURN_IF_ERROR(c.append(a));
  std::vector<Reply> r;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    auto one = c.read();
    if (!one) return one.status();
    r.push_back(std::move(one).value());
  }
  const auto count = [](const Reply& x) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, x.integer));
  };
  Summary out;
  out.later = count(r[0]);
  out.finished = count(r[1]);
  out.dead_letters = count(r[2]);
  for (std::size_t s = 3; s + 2 < r.size(); s += 3) {  // each band: length, pending, consumers
    out.length += count(r[s]);
    if (!r[s + 1].elements.empty()) out.pending += count(r[s + 1].elements[0]);
    for (const Reply& consumer : r[s + 2].elements) {  // an error (no group yet): none
      Consumer seen;
      const auto& f = consumer.elements;
      for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
        if (f[i].str == "name") seen.name = f[i + 1].str;
        if (f[i].str == "pending") seen.pending = count(f[i + 1]);
        if (f[i].str == "idle") seen.idle_ms = f[i + 1].integer;
      }
      auto same = std::find_if(out.consumers.begin(), out.consumers.end(),
                               [&](const Consumer& x) { return x.name == seen.name; });
      if (same == out.consumers.end()) {
        out.consumers.push_back(std::move(seen));
      } else {
        same->pending += seen.pending;
        same->idle_ms = std::min(same->idle_ms, seen.idle_ms);
      }
    }
  }
  for (const Consumer& one : out.consumers) {
    SP_RETURN_IF_ERROR(c.append({"EXISTS", keys_.node_prefix + one.name}));
  }
  for (Consumer& one : out.consumers) {
    auto alive = c.read();
    if (!alive) return alive.status();
    one.alive = alive->integer == 1;
  }
  return out;
}

}  // namespace sandpool::redis
