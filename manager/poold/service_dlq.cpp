// Service: the dead-letter operations: list and show (reads thread), replay (one, a filter,
// all; each letter to its own pool) and purge (one, a filter, older than) on the job thread.
#include <charconv>
#include <utility>

#include "poold/service.hpp"

namespace sandpool::poold {
namespace {

using nlohmann::json;

std::optional<DeadReason> parse_reason(const std::string& name) {
  for (auto r : {DeadReason::kPermanent, DeadReason::kRetriesExhausted, DeadReason::kCrashLoop,
                 DeadReason::kExpired, DeadReason::kShutdown, DeadReason::kPoolRemoved}) {
    if (to_string(r) == name) return r;
  }
  return std::nullopt;
}

// {"pool","type","reason","task_id","since_ms","until_ms"} -> DeadLetterFilter.
Result<DeadLetterFilter> filter_of(const json& f) {
  DeadLetterFilter out;
  if (!f.is_object()) return Status::invalid("filter: an object");
  if (auto it = f.find("pool"); it != f.end() && it->is_string()) out.pool = it->get<std::string>();
  if (auto it = f.find("type"); it != f.end() && it->is_string()) out.type = it->get<std::string>();
  if (auto it = f.find("reason"); it != f.end()) {
    auto r = it->is_string() ? parse_reason(it->get<std::string>()) : std::nullopt;
    if (!r) return Status::invalid("reason: a dead-letter reason (docs/dead-letters.md)");
    out.reason = r;
  }
  if (auto it = f.find("task_id"); it != f.end() && it->is_number_unsigned()) {
    out.task_id = it->get<std::uint64_t>();
  }
  if (auto it = f.find("since_ms"); it != f.end() && it->is_number_integer()) {
    out.from_ms = it->get<std::int64_t>();
  }
  if (auto it = f.find("until_ms"); it != f.end() && it->is_number_integer()) {
    out.until_ms = it->get<std::int64_t>();
  }
  return out;
}

// A page cursor is "<dead_lettered_ms>:<letter_id>".
std::string cursor_text(const DeadLetterCursor& c) {
  return std::to_string(c.dead_lettered_ms) + ":" + std::to_string(c.letter_id);
}

std::optional<DeadLetterCursor> parse_cursor(const std::string& s) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return std::nullopt;
  DeadLetterCursor c;
  auto a = std::from_chars(s.data(), s.data() + colon, c.dead_lettered_ms);
  auto b = std::from_chars(s.data() + colon + 1, s.data() + s.size(), c.letter_id);
  if (a.ec != std::errc() || b.ec != std::errc() || b.ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  return c;
}

json letter_json(const DeadLetter& l) {
  json j = task_json(l.task);
  j["letter_id"] = l.letter_id;
  j["task_id"] = l.task.id;
  j["pool"] = l.pool;
  j["dead_lettered_ms"] = l.dead_lettered_ms;
  j["payload_bytes"] = l.payload.size();
  return j;
}

std::optional<std::uint64_t> id_arg(const json& a) {
  auto it = a.find("id");
  if (it == a.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

}  // namespace

// No flush before a read: a pool reports a task dead_lettered only once its letter is
// committed (pool_loop_letters.cpp), so every letter a client was told about is already
// readable, and a read never waits on a store whose writes fail.
void Service::op_dlq_list(const Request& req, const Responder& res) {
  const json& a = req.args;
  auto filter = filter_of(a);
  if (!filter) return (void)res.error(filter.status());
  DeadLetterPage page;
  page.limit = std::max<std::size_t>(1, std::min<std::size_t>(a.value("limit", 100), 10000));
  if (auto c = a.find("cursor"); c != a.end() && c->is_string()) {
    page.after = parse_cursor(c->get<std::string>());
    if (!page.after) {
      return (void)res.error(Status::invalid("cursor: as returned in `next_cursor`"));
    }
  }
  auto list = store_->list(*filter, page);
  if (!list) return (void)res.error(list.status());
  json letters = json::array();
  for (const DeadLetter& l : list->letters) letters.push_back(letter_json(l));
  json out{{"entries", std::move(letters)}};
  if (list->next) out["next_cursor"] = cursor_text(*list->next);
  res.ok(std::move(out));
}

void Service::op_dlq_show(const Request& req, const Responder& res) {
  auto id = id_arg(req.args);
  if (!id) return (void)res.error(Status::invalid("id: a letter id"));
  auto l = store_->get(*id);
  if (!l) return (void)res.error(l.status());
  json j = letter_json(*l);
  j["options"] = {{"priority", l->options.priority}, {"key", l->options.key}};
  if (l->options.timeout) j["options"]["timeout_ms"] = l->options.timeout->count();
  if (l->options.retries) j["options"]["retries"] = *l->options.retries;
  res.ok(std::move(j), l->payload);
}

void Service::op_dlq_replay(const Request& req, const Responder& res) {
  auto out = dlq_replay(req.args);
  if (!out) return (void)res.error(out.status());
  res.ok(std::move(out).value());
}

void Service::op_dlq_purge(const Request& req, const Responder& res) {
  const json& a = req.args;
  Result<std::uint64_t> n = std::uint64_t{0};
  if (auto id = id_arg(a)) {
    n = store_->purge(*id);
  } else if (auto f = a.find("filter"); f != a.end()) {
    auto filter = filter_of(*f);
    if (!filter) return (void)res.error(filter.status());
    n = store_->purge(*filter);
  } else if (auto age = a.find("older_than_ms"); age != a.end() && age->is_number_unsigned()) {
    using namespace std::chrono;
    const auto now = duration_cast<milliseconds>(system_clock::now().time_since_epoch());
    n = store_->purge_older_than(now.count() - age->get<std::int64_t>());
  } else if (a.value("all", false)) {
    n = store_->purge(DeadLetterFilter{});
  } else {
    return (void)res.error(Status::invalid("dlq_purge: id, filter, older_than_ms or all"));
  }
  if (!n) return (void)res.error(n.status());
  res.ok({{"purged", *n}});
}

Result<json> Service::dlq_replay(const json& a) {
  json task_ids = json::array();
  std::uint64_t failed = 0;
  std::string first_error;
  if (auto id = id_arg(a)) {
    auto letter = store_->get(*id);
    if (!letter) return Status::error(Code::kNotFound, letter.status().message());
    auto pool = pool_named(letter->pool);
    if (!pool) return pool.status();
    auto t = (*pool)->replay(*id, replay_callbacks());
    if (!t) return t.status();
    task_ids.push_back(t->id());
  } else {
    DeadLetterFilter filter;
    if (auto f = a.find("filter"); f != a.end()) {
      auto parsed = filter_of(*f);
      if (!parsed) return Status::invalid(parsed.status().message());
      filter = *parsed;
    } else if (!a.value("all", false)) {
      return Status::invalid("dlq_replay: id, filter or all");
    }
    for (const auto& [name, pool] : pools()) {
      if (filter.pool && *filter.pool != name) continue;
      DeadLetterFilter mine = filter;
      mine.pool = name;
      auto report = pool->replay_matching(mine, replay_callbacks());
      if (!report) {
        ++failed;
        if (first_error.empty()) first_error = report.status().message();
        continue;
      }
      for (const Ticket& t : report->tickets) task_ids.push_back(t.id());
      failed += report->failed;
      if (first_error.empty()) first_error = report->first_error;
    }
  }
  json out{{"replayed", task_ids.size()}, {"ids", std::move(task_ids)}, {"failed", failed}};
  if (!first_error.empty()) out["first_error"] = first_error;
  return out;
}

}  // namespace sandpool::poold
