// TaskConsumer (task_consumer.hpp): a node's reads, takes and claims, and its fenced changes to
// the entries it holds.
#include <sandpool/redis/task_consumer.hpp>

#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

namespace sandpool::redis {
namespace {

// A fenced script's answer: 1 done, 0 refused.
Result<Fenced> fenced(const char* what, Result<Reply> r) {
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected(what, *r);
  return r->integer == 1 ? Fenced::kDone : Fenced::kNotYours;
}

// An entry's fields into a StreamEntry; false when a field is malformed.
bool to_entry(const Reply& entry, StreamEntry* out) {
  if (entry.elements.size() != 2) return false;
  out->entry_id = entry.elements[0].str;
  const auto& f = entry.elements[1].elements;
  bool has_id = false;
  for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i].str;
    const std::string& v = f[i + 1].str;
    if (k == "id") {
      has_id = parse_number(v, &out->task_id);
      if (!has_id) return false;
    } else if (k == "type") {
      out->task.type = v;
    } else if (k == "payload") {
      out->task.payload = v;
    } else if (k == "priority") {
      if (!parse_number(v, &out->task.options.priority)) return false;
    } else if (k == "timeout_ms") {
      std::int64_t ms = 0;
      if (!parse_number(v, &ms)) return false;
      out->task.options.timeout = std::chrono::milliseconds(ms);
    } else if (k == "retries") {
      std::uint32_t n = 0;
      if (!parse_number(v, &n)) return false;
      out->task.options.retries = n;
    } else if (k == "key") {
      out->task.options.key = v;
    } else if (k == "idem") {
      out->task.options.idempotency_key = v;
    } else if (k == "tenant") {
      out->task.options.tenant = v;
    }  // fields of later versions are left for them
  }
  return has_id && !out->task.type.empty();
}

}  // namespace

Result<std::size_t> lua::touch_in_bands(Connection& c, const std::string (&streams)[3],
                                        const std::string& consumer,
                                        const std::vector<std::pair<Band, std::string>>& entries) {
  std::size_t touched = 0;
  for (const Band b : kBands) {
    lua::Touch a{.stream = streams[PoolKeys::index_of(b)], .consumer = consumer};
    for (const auto& [band, id] : entries) {
      if (band == b) a.entries.push_back(id);
    }
    if (a.entries.empty()) continue;
    auto r = lua::run(c, a);
    if (!r) return r.status();
    if (r->is_error()) return r->status();
    if (r->type != Reply::Type::kInteger) return unexpected("touch", *r);
    touched += static_cast<std::size_t>(r->integer);
  }
  return touched;
}

Status TaskConsumer::join(Connection& c, const std::string& consumer) const {
  for (const std::string& stream : keys_.streams) {
    auto r = c.command({"XGROUP", "CREATECONSUMER", stream, PoolKeys::kGroup, consumer});
    if (!r) return r.status();
    if (r->is_error()) return r->status();
  }
  return Status::ok();
}

Result<std::vector<StreamEntry>> TaskConsumer::read(Connection& c, const std::string& consumer,
                                                    std::size_t count,
                                                    std::chrono::milliseconds block) const {
  std::vector<StreamEntry> out;
  if (count == 0) return out;
  // One read over every band (read_group). COUNT holds per stream, so when several bands
  // have entries it may get up to 3 x `count`: the first `count` in band order are the batch
  // (the higher bands first, as reads band by band would take them), and the rest goes back
  // unread in the take's script.
  auto read = read_group(c, consumer, keys_.streams, count, block);
  if (!read) return read.status();
  if (!*read) return out;  // nothing (within `block`)
  const std::optional<Reply>& w = *read;
  std::vector<std::string_view> back[std::size(kBands)];
  for (std::size_t b = 0; b < std::size(kBands); ++b) {  // the reply's streams in band order
    for (const Reply& stream : w->elements) {
      if (stream.elements.size() != 2) return unexpected("XREADGROUP", *w);
      if (stream.elements[0].str != keys_.streams[b]) continue;
      for (const Reply& entry : stream.elements[1].elements) {
        if (out.size() < count) {
          out.push_back(parse_entry(entry, kBands[b]));
          out.back().deliveries = 1;
          out.back().read_here = true;
        } else if (!entry.elements.empty()) {
          back[b].push_back(entry.elements[0].str);
        }
      }
    }
  }
  SP_RETURN_IF_ERROR(take(c, consumer, out, back));
  return out;
}

StreamEntry TaskConsumer::parse_entry(const Reply& entry, Band band) const {
  StreamEntry e;
  e.band = band;
  if (!to_entry(entry, &e)) {
    e.malformed = "entry " + (entry.elements.empty() ? std::string("?") : entry.elements[0].str) +
                  " of " + keys_.stream_key(band) +
                  " has no valid id or type, or a malformed option";
  }
  return e;
}

Result<Fenced> TaskConsumer::discard(Connection& c, const StreamEntry& e,
                                     const std::string& consumer) const {
  return fenced("discard", lua::run(c, lua::Discard{.stream = keys_.stream_of(e),
                                                    .entry = e.entry_id,
                                                    .consumer = consumer}));
}

Result<std::vector<Fenced>> TaskConsumer::record_attempts(
    Connection& c, const std::vector<const StreamEntry*>& entries, const std::string& consumer,
    const std::vector<std::string>& attempts) const {
  if (entries.size() != attempts.size()) {
    return Status::invalid("record_attempts: one attempt per entry");
  }
  std::vector<Connection::Call> calls;
  calls.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const StreamEntry& e = *entries[i];
    calls.push_back(lua::Attempt{.stream = keys_.stream_of(e),
                                 .entry = e.entry_id,
                                 .consumer = consumer,
                                 .task_id = e.task_id,
                                 .prefix = keys_.prefix,
                                 .attempt = attempts[i]}
                        .call());
  }
  std::vector<Fenced> out;
  if (calls.empty()) return out;
  auto replies = c.eval_many(lua::Attempt::kScript, calls);
  if (!replies) return replies.status();
  if (replies->size() != calls.size()) return Status::invalid("attempt: a reply per call");
  out.reserve(replies->size());
  for (Reply& r : *replies) {
    auto one = fenced("attempt", Result<Reply>(std::move(r)));
    if (!one) return one.status();
    out.push_back(*one);
  }
  return out;
}

Result<Fenced> TaskConsumer::record_attempt(Connection& c, const StreamEntry& e,
                                            const std::string& consumer,
                                            const std::string& attempt) const {
  auto r = record_attempts(c, {&e}, consumer, {attempt});
  if (!r) return r.status();
  return r->front();
}

Result<std::vector<Fenced>> TaskConsumer::end_all(Connection& c, const std::string& consumer,
                                                  const std::vector<EndWrite>& ends) const {
  // One script per kMaxEnds ends, pipelined: one round trip for all.
  constexpr std::size_t kPer = lua::FinishBatch::kMaxEnds;
  std::vector<Connection::Call> calls;
  for (std::size_t at = 0; at < ends.size(); at += kPer) {
    calls.push_back(lua::FinishBatch{.done = keys_.done,
                                     .letters = keys_.letters,
                                     .streams = keys_.streams,
                                     .consumer = consumer,
                                     .prefix = keys_.prefix,
                                     .keep_finished = keep_finished_,
                                     .keep_letters = keep_letters_,
                                     .ends = ends.data() + at,
                                     .count = std::min(kPer, ends.size() - at)}
                        .call());
  }
  std::vector<Fenced> out;
  if (calls.empty()) return out;
  auto replies = c.eval_many(lua::FinishBatch::kScript, calls);
  if (!replies) return replies.status();
  out.reserve(ends.size());
  for (std::size_t i = 0; i < replies->size(); ++i) {
    const Reply& r = (*replies)[i];
    if (r.is_error()) return r.status();
    if (r.elements.size() != std::min(kPer, ends.size() - i * kPer)) {
      return unexpected("finish_batch", r);
    }
    for (const Reply& one : r.elements) {
      if (one.type != Reply::Type::kInteger) return unexpected("finish_batch", r);
      out.push_back(one.integer == 1 ? Fenced::kDone : Fenced::kNotYours);
    }
  }
  return out;
}

Result<Fenced> TaskConsumer::release(Connection& c, const StreamEntry& e,
                                     const std::string& consumer) const {
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  return fenced("release", lua::run(c, lua::Release{.stream = keys_.stream_of(e),
                                                    .done = keys_.done,
                                                    .entry = e.entry_id,
                                                    .consumer = consumer,
                                                    .task_id = e.task_id,
                                                    .prefix = keys_.prefix,
                                                    .now_ms = now_ms}));
}

Result<TaskConsumer::Refusal> TaskConsumer::refused(Connection& c, const StreamEntry& e,
                                                    const std::string& consumer,
                                                    std::int64_t now_ms,
                                                    std::chrono::milliseconds pause) const {
  auto r = lua::run(c, lua::Refused{.stream = keys_.stream_of(e),
                                    .later = keys_.later,
                                    .streams = keys_.streams,
                                    .entry = e.entry_id,
                                    .consumer = consumer,
                                    .task_id = e.task_id,
                                    .prefix = keys_.prefix,
                                    .node_prefix = keys_.node_prefix,
                                    .now_ms = now_ms,
                                    .pause_ms = pause.count(),
                                    .at_least = kMaxRefusals});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  const auto& v = r->elements;
  const auto whole = [&](std::size_t i) {
    return v[i].type == Reply::Type::kInteger && v[i].integer >= 0;
  };
  if (r->type != Reply::Type::kArray || v.empty() || !whole(0)) return unexpected("refused", *r);
  Refusal out;
  if (v[0].integer == 0) {
    if (v.size() != 1) return unexpected("refused", *r);
    return out;  // kNotYours
  }
  if (v[0].integer > std::numeric_limits<std::uint32_t>::max() || v.size() < 2 || !whole(1)) {
    return unexpected("refused", *r);
  }
  out.refusals = static_cast<std::uint32_t>(v[0].integer);
  if (v[1].integer == 1 && v.size() == 2) {
    out.verdict = Refusal::Verdict::kReject;
    return out;
  }
  if (v[1].integer != 0 || v.size() != 3 || !whole(2)) return unexpected("refused", *r);
  out.verdict = Refusal::Verdict::kDeferred;
  out.due_ms = v[2].integer;
  return out;
}

Status TaskConsumer::take(Connection& c, const std::string& consumer,
                          std::vector<StreamEntry>& entries) const {
  return take(c, consumer, entries, {});
}

Status TaskConsumer::take(Connection& c, const std::string& consumer,
                          std::vector<StreamEntry>& entries,
                          const std::vector<std::string_view> (&back)[3]) const {
  lua::Take a{
      .streams = keys_.streams, .prefix = keys_.prefix, .pool = keys_.pool, .consumer = consumer};
  for (const StreamEntry& e : entries) {
    if (e.malformed.empty()) a.entries.push_back({e.task_id, e.entry_id, e.band, e.task.type});
  }
  bool any_back = false;
  for (std::size_t b = 0; b < 3; ++b) {
    a.back[b] = back[b];
    any_back = any_back || !back[b].empty();
  }
  if (a.entries.empty() && !any_back) return Status::ok();
  auto r = lua::run(c, a);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  std::size_t next = 0;
  std::vector<bool> gone(entries.size(), false);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    StreamEntry& e = entries[i];
    if (!e.malformed.empty()) continue;
    if (next >= r->elements.size()) return unexpected("take", *r);
    const std::int64_t attempts = r->elements[next++].integer;
    gone[i] = attempts < 0;
    e.attempts = static_cast<std::uint32_t>(std::max<std::int64_t>(0, attempts));
  }
  std::size_t i = 0;
  std::erase_if(entries, [&](const StreamEntry&) { return gone[i++]; });
  return Status::ok();
}

Result<std::vector<bool>> TaskConsumer::cancel_asked(Connection& c,
                                                     const std::vector<std::uint64_t>& ids) const {
  for (const std::uint64_t id : ids) {
    SP_RETURN_IF_ERROR(c.append({"HGET", keys_.task_key(id), "cancel"}));
  }
  std::vector<bool> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto r = c.read();
    if (!r) return r.status();
    out.push_back(r->str == "1");
  }
  return out;
}

Result<TaskConsumer::Retried> TaskConsumer::retry(Connection& c, const StreamEntry& e,
                                                  const std::string& consumer,
                                                  const std::vector<std::string>& attempts,
                                                  std::uint32_t retries, const Backoff& backoff,
                                                  std::int64_t now_ms) const {
  auto r = lua::run(c, lua::Retry{.stream = keys_.stream_of(e),
                                  .later = keys_.later,
                                  .entry = e.entry_id,
                                  .consumer = consumer,
                                  .task_id = e.task_id,
                                  .prefix = keys_.prefix,
                                  .retries = retries,
                                  .now_ms = now_ms,
                                  .base_ms = backoff.base_ms,
                                  .multiplier = backoff.multiplier,
                                  .max_ms = backoff.max_ms,
                                  .jitter = backoff.jitter,
                                  .attempts = &attempts});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("retry", *r);
  return r->integer == 3   ? Retried::kCancelled
         : r->integer == 2 ? Retried::kDeferred
         : r->integer == 1 ? Retried::kExhausted
                           : Retried::kNotYours;
}

Result<std::size_t> TaskConsumer::touch(
    Connection& c, const std::string& consumer,
    const std::vector<std::pair<Band, std::string>>& entries) const {
  return lua::touch_in_bands(c, keys_.streams, consumer, entries);
}

Result<std::vector<StreamEntry>> TaskConsumer::claim_idle(Connection& c,
                                                          const std::string& consumer,
                                                          std::chrono::milliseconds min_idle,
                                                          std::size_t max) const {
  // Not XAUTOCLAIM, which takes whatever is idle: an entry is claimed only when its node's
  // heartbeat key is gone too (a script per page of the pending list, looping over it).
  constexpr std::size_t kPage = 256;
  std::vector<StreamEntry> out;
  for (const Band b : kBands) {
    std::string start = "-";
    while (out.size() < max) {
      auto r = lua::run(c, lua::ClaimIdle{.stream = keys_.stream_key(b),
                                          .consumer = consumer,
                                          .min_idle_ms = min_idle.count(),
                                          .max = max - out.size(),
                                          .node_prefix = keys_.node_prefix,
                                          .start = start,
                                          .page = kPage});
      if (!r) return r.status();
      if (r->is_error()) return r->status();
      if (r->elements.size() != 2) return unexpected("claim_idle", *r);
      for (const Reply& entry : r->elements[1].elements) {
        if (entry.elements.size() == 2) out.push_back(parse_entry(entry, b));
      }
      const std::string& last = r->elements[0].str;
      if (last.empty() || out.size() >= max) break;  // the pending list was scanned, or enough
      start = "(" + last;
    }
  }
  // Their delivery counts, the claim included.
  for (const StreamEntry& e : out) {
    SP_RETURN_IF_ERROR(
        c.append({"XPENDING", keys_.stream_of(e), PoolKeys::kGroup, e.entry_id, e.entry_id, "1"}));
  }
  for (StreamEntry& e : out) {
    auto p = c.read();
    if (!p) return p.status();
    if (p->elements.size() == 1 && p->elements[0].elements.size() == 4) {
      e.deliveries = static_cast<std::uint64_t>(p->elements[0].elements[3].integer);
    }
  }
  return out;
}

}  // namespace sandpool::redis