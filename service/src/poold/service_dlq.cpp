// Service: the dead-letter operations: list and show (reads thread), replay (one, a filter,
// all; each letter to its own pool) and purge (one, a filter, older than) on the job thread.
#include <algorithm>
#include <charconv>
#include <utility>

#include <sandpool/service/service.hpp>
#include <sandpool/task/enum_names.hpp>

namespace sandpool::poold {
namespace {

// The typed filter -> DeadLetterFilter; the reason must name one.
Result<DeadLetterFilter> filter_of(const ops::DlqFilter& f) {
  DeadLetterFilter out;
  out.pool = f.pool;
  out.type = f.type;
  if (f.reason) {
    // A reason a letter can have: not "none".
    out.reason = parse_enum(*f.reason, DeadReason::kPermanent, DeadReason::kRejected);
    if (!out.reason) return Status::invalid("reason: a dead-letter reason (docs/dead-letters.md)");
  }
  out.task_id = f.task_id;
  out.from_ms = f.since_ms;
  out.until_ms = f.until_ms;
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

// A stream entry id, "<ms>-<seq>": a Redis pool's letter cursor.
bool is_entry_id(const std::string& s) {
  const auto dash = s.find('-');
  std::uint64_t ms = 0, seq = 0;
  if (dash == std::string::npos || s.size() > 41) return false;
  auto a = std::from_chars(s.data(), s.data() + dash, ms);
  auto b = std::from_chars(s.data() + dash + 1, s.data() + s.size(), seq);
  return a.ec == std::errc() && a.ptr == s.data() + dash && b.ec == std::errc() &&
         b.ptr == s.data() + s.size();
}

ops::DeadLetterEntry entry_of(const DeadLetter& l) {
  ops::DeadLetterEntry e;
  e.task = account_of(l.task);
  e.letter_id = l.letter_id;
  e.pool = l.pool;
  e.dead_lettered_ms = l.dead_lettered_ms;
  e.payload_bytes = l.payload.size();
  return e;
}

}  // namespace

// No flush before a read: a pool reports a task dead_lettered only once its letter is
// committed (pool_loop_letters.cpp), so every letter a client was told about is already
// readable, and a read never waits on a store whose writes fail.
void Service::serve(const Request&, const ops::DlqListArgs& a,
                    const OpResponder<ops::DlqList>& res) {
  auto filter = filter_of(a.filter);
  if (!filter) return (void)res.error(filter.status());
  DeadLetterPage page;
  page.limit = static_cast<std::size_t>(std::clamp<std::uint64_t>(a.limit, 1, 10000));
  if (redis_ && filter->pool && redis_->serves(*filter->pool)) {
    // A Redis pool's letters are in Redis (docs/redis-pools.md): its cursor is the letter's
    // entry id in the pool's dead-letter stream.
    std::string after;
    if (a.cursor) {
      if (!is_entry_id(*a.cursor)) {
        return (void)res.error(Status::invalid("cursor: as returned in `next_cursor`"));
      }
      after = *a.cursor;
    }
    auto letters = redis_->dead_letters(*filter->pool, *filter, page.limit, after);
    if (!letters) return (void)res.error(letters.status());
    ops::DlqListReply out;
    for (const DeadLetter& l : letters->letters) out.entries.push_back(entry_of(l));
    out.next_cursor = letters->next;
    return (void)res.ok(out);
  }
  if (a.cursor) {
    page.after = parse_cursor(*a.cursor);
    if (!page.after) {
      return (void)res.error(Status::invalid("cursor: as returned in `next_cursor`"));
    }
  }
  auto list = store_->list(*filter, page);
  if (!list) return (void)res.error(list.status());
  ops::DlqListReply out;
  for (const DeadLetter& l : list->letters) out.entries.push_back(entry_of(l));
  if (list->next) out.next_cursor = cursor_text(*list->next);
  res.ok(out);
}

void Service::serve(const Request&, const ops::DlqShowArgs& a,
                    const OpResponder<ops::DlqShow>& res) {
  // A Redis pool's letter is named by its task's cluster id.
  auto l =
      redis_ && RedisPools::is_cluster_id(a.id) ? redis_->dead_letter(a.id) : store_->get(a.id);
  if (!l) return (void)res.error(l.status());
  ops::DlqShowReply out{entry_of(*l),
                        {l->options.priority, l->options.key, l->options.timeout,
                         l->options.retries, l->options.tenant}};
  res.ok(out, l->payload);
}

void Service::serve(const Request&, const ops::DlqSelector& a,
                    const OpResponder<ops::DlqReplay>& res) {
  auto out = dlq_replay(a);
  if (!out) return (void)res.error(out.status());
  res.ok(*out);
}

void Service::serve(const Request&, const ops::DlqSelector& a,
                    const OpResponder<ops::DlqPurge>& res) {
  auto out = dlq_purge(a);
  if (!out) return (void)res.error(out.status());
  res.ok(*out);
}

// The Redis pools' letters are in Redis (docs/redis-pools.md, "Dead letters"): an id of 2^52
// or more names a cluster task's letter; a filter without a pool, --older-than and --all
// take the node's store and every Redis pool it serves.
Result<ops::DlqPurgeReply> Service::dlq_purge(const ops::DlqSelector& a) {
  if (a.id) {
    auto n = redis_ && RedisPools::is_cluster_id(*a.id) ? redis_->purge_letter(*a.id)
                                                        : store_->purge(*a.id);
    if (!n) return n.status();
    return ops::DlqPurgeReply{*n, ""};
  }
  DeadLetterFilter filter;
  if (a.filter) {
    auto parsed = filter_of(*a.filter);
    if (!parsed) return parsed.status();
    filter = *parsed;
  } else if (a.older_than_ms) {
    using namespace std::chrono;
    const auto now = duration_cast<milliseconds>(system_clock::now().time_since_epoch());
    filter.until_ms = (now - *a.older_than_ms).count();
  } else if (!a.all) {
    return Status::invalid("dlq_purge: id, filter, older_than_ms or all");
  }
  // The store, then each Redis pool: one that fails is named in first_error, and what the
  // others purged (and it, before it stopped) is still counted. Nothing purged: the error.
  ops::DlqPurgeReply out;
  Status first_failure;
  const auto failed = [&](const Status& why) {
    if (first_failure) first_failure = why;
  };
  if (!redis_ || !filter.pool || !redis_->serves(*filter.pool)) {
    auto n = store_->purge(filter);
    n ? (void)(out.purged += *n) : failed(n.status());
  }
  for (const auto& [name, pool] : redis_ ? pools() : decltype(pools()){}) {
    if ((filter.pool && *filter.pool != name) || !redis_->serves(name)) continue;
    auto swept = redis_->purge_letters(name, filter);
    if (!swept) {
      failed(swept.status());
      continue;
    }
    out.purged += swept->purged;
    if (!swept->stopped) failed(swept->stopped);
  }
  if (!first_failure && out.purged == 0) return first_failure;
  if (!first_failure) out.first_error = first_failure.to_string();
  return out;
}

Result<ops::DlqReplayReply> Service::dlq_replay(const ops::DlqSelector& a) {
  ops::DlqReplayReply out;
  if (a.id && redis_ && RedisPools::is_cluster_id(*a.id)) {
    auto id = redis_->replay_letter(*a.id);
    if (!id) return id.status();
    out.ids.push_back(*id);
    return out;
  }
  if (a.id) {
    auto letter = store_->get(*a.id);
    if (!letter) return Status::error(Code::kNotFound, letter.status().message());
    auto pool = pool_named(letter->pool);
    if (!pool) return pool.status();
    auto t = (*pool)->replay(*a.id, replay_callbacks());
    if (!t) return t.status();
    out.ids.push_back(t->id());
    return out;
  }
  DeadLetterFilter filter;
  if (a.filter) {
    auto parsed = filter_of(*a.filter);
    if (!parsed) return Status::invalid(parsed.status().message());
    filter = *parsed;
  } else if (!a.all) {
    return Status::invalid("dlq_replay: id, filter or all");
  }
  const auto failed = [&out](std::uint64_t n, const Status& why) {
    out.failed += n;
    if (out.first_error.empty()) out.first_error = why.to_string();
  };
  for (const auto& [name, pool] : pools()) {
    if (filter.pool && *filter.pool != name) continue;
    DeadLetterFilter mine = filter;
    mine.pool = name;
    if (redis_ && redis_->serves(name)) {
      auto swept = redis_->replay_letters(name, mine);
      if (!swept) {
        failed(1, swept.status());
        continue;
      }
      // Stopped part way: the tasks it replayed before are answered all the same.
      out.ids.insert(out.ids.end(), swept->replayed.begin(), swept->replayed.end());
      if (!swept->stopped) failed(1, swept->stopped);
      if (swept->refused != 0) failed(swept->refused, Status::invalid(swept->first_refusal));
      continue;
    }
    auto report = pool->replay_matching(mine, replay_callbacks());
    if (!report) {
      failed(1, report.status());
      continue;
    }
    for (const Ticket& t : report->tickets) out.ids.push_back(t.id());
    out.failed += report->failed;
    if (out.first_error.empty()) out.first_error = report->first_error;
  }
  return out;
}

}  // namespace sandpool::poold
