// TaskStream (task_stream.hpp): the keys of a Redis pool and the scripts that change them.
#include <sandpool/redis/task_stream.hpp>

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

TaskStream::TaskStream(std::string prefix, std::string pool, std::uint64_t max_finished,
                       std::uint64_t max_letters)
    : max_finished_(max_finished),
      max_letters_(max_letters),
      prefix_(std::move(prefix)),
      pool_(std::move(pool)),
      later_(prefix_ + pool_ + ":later"),
      done_(prefix_ + pool_ + ":done"),
      done_bytes_(done_ + ":bytes"),
      letters_(prefix_ + pool_ + ":dlq") {
  for (const Band b : kBands) streams_[index_of(b)] = prefix_ + pool_ + ":q:" + std::to_string(b);
}

TaskStream::TaskStream(std::string prefix, std::string pool, const Limits& limits)
    : TaskStream(std::move(prefix), std::move(pool), limits.finished, limits.letters) {
  finished_max_age_ms_ = limits.finished_max_age_ms;
  finished_max_bytes_ = limits.finished_max_bytes;
}

Status TaskStream::ensure_group(Connection& c) const {
  for (const std::string& stream : streams_) {
    auto r = c.command({"XGROUP", "CREATE", stream, kGroup, "0", "MKSTREAM"});
    if (!r) return r.status();
    if (r->is_error() && r->str.rfind("BUSYGROUP", 0) != 0) return r->status();
  }
  auto ids = c.command({"SET", prefix_ + "ids", std::to_string(kFirstId - 1), "NX"});
  if (!ids) return ids.status();
  return ids->status();
}

Status TaskStream::join(Connection& c, const std::string& consumer) const {
  for (const std::string& stream : streams_) {
    auto r = c.command({"XGROUP", "CREATECONSUMER", stream, kGroup, consumer});
    if (!r) return r.status();
    if (r->is_error()) return r->status();
  }
  return Status::ok();
}

static_assert(TaskStream::kFirstId - 1 == 4503599627370495ULL, "the submit script's id base");

Connection::Call TaskStream::submit_call(const StreamTask& task, std::int64_t now_ms) const {
  return submit_args(task, now_ms).call();
}

lua::Submit TaskStream::submit_args(const StreamTask& task, std::int64_t now_ms) const {
  const TaskOptions& t = task.options;
  lua::Submit s;
  s.band = band_of(t.priority);
  s.prefix = prefix_;
  s.pool = pool_;
  s.now_ms = now_ms;
  s.task_type = task.type;
  s.not_before_ms = t.not_before_ms().value_or(0);
  auto& args = s.fields;
  args = {"type", task.type, "payload", task.payload};
  if (t.priority != 0) args.insert(args.end(), {"priority", std::to_string(t.priority)});
  if (t.timeout) args.insert(args.end(), {"timeout_ms", std::to_string(t.timeout->count())});
  if (t.retries) args.insert(args.end(), {"retries", std::to_string(*t.retries)});
  if (!t.key.empty()) args.insert(args.end(), {"key", t.key});
  if (!t.idempotency_key.empty()) args.insert(args.end(), {"idem", t.idempotency_key});
  if (!t.tenant.empty()) args.insert(args.end(), {"tenant", t.tenant});
  s.ids = prefix_ + "ids";
  s.stream = stream_key(s.band);
  if (!t.idempotency_key.empty()) s.idem = prefix_ + "idem:" + t.idempotency_key;
  s.later = later_;
  return s;
}

Result<TaskStream::Submitted> TaskStream::submit(Connection& c, const StreamTask& t,
                                                 std::int64_t now_ms) const {
  const Connection::Call call = submit_call(t, now_ms);
  // Loaded first, so that a failure below means the script was sent.
  if (auto sha = c.load(lua::Submit::kScript); !sha) return sha.status();
  auto r = c.eval(lua::Submit::kScript, call.keys, call.args);
  if (!r) return c.broke_writing() ? r.status() : outcome_lost(r.status());  // not sent: none
  return submitted(*r);
}

Result<TaskStream::SlotClaim> TaskStream::claim_slot(Connection& c, const StreamTask& t,
                                                     const std::string& schedule,
                                                     std::int64_t slot_s, const std::string& node,
                                                     std::int64_t now_ms) const {
  lua::ClaimSlot a{.task = submit_args(t, now_ms)};
  const std::string claim = schedule_claim_key(schedule);
  a.claim = claim;
  a.slot_s = slot_s;
  a.node = node;
  a.max_lead_s = kMaxSlotLeadSeconds;
  auto r = lua::run(c, a);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 3 || r->elements[0].type != Reply::Type::kInteger ||
      r->elements[1].type != Reply::Type::kInteger || r->elements[2].type != Reply::Type::kString) {
    return unexpected("claim_slot", *r);
  }
  SlotClaim out;
  out.task_id = static_cast<std::uint64_t>(r->elements[0].integer);
  out.won = r->elements[1].integer == 1;
  out.paused = r->elements[1].integer == 2;
  out.node = r->elements[2].str;
  return out;
}

Status TaskStream::set_schedule_paused(Connection& c, const std::string& schedule, bool paused,
                                       const std::string& node, std::int64_t now_ms) const {
  const std::string key = schedule_claim_key(schedule);
  auto r = paused ? c.command({"HSET", key, "paused", node, "paused_ms", std::to_string(now_ms)})
                  : c.command({"HDEL", key, "paused", "paused_ms"});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  return Status::ok();
}

std::string TaskStream::schedule_claim_key(const std::string& schedule) const {
  return prefix_ + "schedule:" + schedule;
}

Result<std::vector<StreamEntry>> TaskStream::read(Connection& c, const std::string& consumer,
                                                  std::size_t count,
                                                  std::chrono::milliseconds block) const {
  std::vector<StreamEntry> out;
  if (count == 0) return out;
  // The higher bands first, at most `count` in all, each a plain XREADGROUP (its reply is not
  // made Lua tables and back), then the tasks taken in one script (fenced).
  for (const Band b : kBands) {
    if (out.size() >= count) break;
    auto r = c.command({"XREADGROUP", "GROUP", kGroup, consumer, "COUNT",
                        std::to_string(count - out.size()), "STREAMS", stream_key(b), ">"});
    if (!r) return r.status();
    if (r->is_error()) return r->status();
    if (r->is_nil()) continue;
    if (r->elements.size() != 1 || r->elements[0].elements.size() != 2) {
      return unexpected("XREADGROUP", *r);
    }
    for (const Reply& entry : r->elements[0].elements[1].elements) {
      out.push_back(parse_entry(entry, b));
      out.back().deliveries = 1;
    }
  }
  if (!out.empty()) {
    SP_RETURN_IF_ERROR(take(c, consumer, out));
    return out;
  }
  if (block.count() <= 0) return out;
  // Nothing waits: block on every band for the first entries to come, then take them.
  std::vector<std::string> args = {"XREADGROUP", "GROUP",
                                   kGroup,       consumer,
                                   "COUNT",      std::to_string(count),
                                   "BLOCK",      std::to_string(block.count()),
                                   "STREAMS"};
  args.insert(args.end(), std::begin(streams_), std::end(streams_));
  args.insert(args.end(), std::size(streams_), ">");
  auto w = c.command(args);
  if (!w) return w.status();
  if (w->is_error()) return w->status();
  if (w->is_nil()) return out;   // nothing within `block`
  for (const Band b : kBands) {  // the reply's streams in band order
    for (const Reply& stream : w->elements) {
      if (stream.elements.size() != 2) return unexpected("XREADGROUP", *w);
      if (stream.elements[0].str != stream_key(b)) continue;
      for (const Reply& entry : stream.elements[1].elements) {
        out.push_back(parse_entry(entry, b));
        out.back().deliveries = 1;
      }
    }
  }
  SP_RETURN_IF_ERROR(take(c, consumer, out));
  return out;
}

StreamEntry TaskStream::parse_entry(const Reply& entry, Band band) const {
  StreamEntry e;
  e.band = band;
  if (!to_entry(entry, &e)) {
    e.malformed = "entry " + (entry.elements.empty() ? std::string("?") : entry.elements[0].str) +
                  " of " + stream_key(band) + " has no valid id or type, or a malformed option";
  }
  return e;
}

Result<std::optional<std::string>> TaskStream::beat(Connection& c, const std::string& prefix,
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

Result<Fenced> TaskStream::discard(Connection& c, const StreamEntry& e,
                                   const std::string& consumer) const {
  return fenced(
      "discard",
      lua::run(c, lua::Discard{.stream = stream_of(e), .entry = e.entry_id, .consumer = consumer}));
}

Result<std::vector<Fenced>> TaskStream::record_attempts(
    Connection& c, const std::vector<const StreamEntry*>& entries, const std::string& consumer,
    const std::vector<std::string>& attempts) const {
  if (entries.size() != attempts.size()) {
    return Status::invalid("record_attempts: one attempt per entry");
  }
  std::vector<Connection::Call> calls;
  calls.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const StreamEntry& e = *entries[i];
    calls.push_back(lua::Attempt{.stream = stream_of(e),
                                 .entry = e.entry_id,
                                 .consumer = consumer,
                                 .task_id = e.task_id,
                                 .prefix = prefix_,
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

Result<Fenced> TaskStream::record_attempt(Connection& c, const StreamEntry& e,
                                          const std::string& consumer,
                                          const std::string& attempt) const {
  auto r = record_attempts(c, {&e}, consumer, {attempt});
  if (!r) return r.status();
  return r->front();
}

Result<std::vector<Fenced>> TaskStream::end_all(Connection& c, const std::string& consumer,
                                                const std::vector<EndWrite>& ends) const {
  // One script per kMaxEnds ends, pipelined: one round trip for all.
  constexpr std::size_t kPer = lua::FinishBatch::kMaxEnds;
  std::vector<Connection::Call> calls;
  for (std::size_t at = 0; at < ends.size(); at += kPer) {
    calls.push_back(lua::FinishBatch{.done = done_,
                                     .letters = letters_,
                                     .streams = streams_,
                                     .consumer = consumer,
                                     .prefix = prefix_,
                                     .keep_finished = max_finished_,
                                     .keep_letters = max_letters_,
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

Result<Fenced> TaskStream::release(Connection& c, const StreamEntry& e,
                                   const std::string& consumer) const {
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  return fenced("release", lua::run(c, lua::Release{.stream = stream_of(e),
                                                    .done = done_,
                                                    .entry = e.entry_id,
                                                    .consumer = consumer,
                                                    .task_id = e.task_id,
                                                    .prefix = prefix_,
                                                    .now_ms = now_ms}));
}

Result<TaskStream::Refusal> TaskStream::refused(Connection& c, const StreamEntry& e,
                                                const std::string& consumer, std::int64_t now_ms,
                                                std::chrono::milliseconds pause) const {
  const std::string node_prefix = prefix_ + "node:";
  auto r = lua::run(c, lua::Refused{.stream = stream_of(e),
                                    .later = later_,
                                    .streams = streams_,
                                    .entry = e.entry_id,
                                    .consumer = consumer,
                                    .task_id = e.task_id,
                                    .prefix = prefix_,
                                    .node_prefix = node_prefix,
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

Status TaskStream::take(Connection& c, const std::string& consumer,
                        std::vector<StreamEntry>& entries) const {
  lua::Take a{.streams = streams_, .prefix = prefix_, .pool = pool_, .consumer = consumer};
  for (const StreamEntry& e : entries) {
    if (e.malformed.empty()) a.entries.push_back({e.task_id, e.entry_id, e.band, e.task.type});
  }
  if (a.entries.empty()) return Status::ok();
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

Result<TaskStream::Cancelled> TaskStream::cancel(Connection& c, std::uint64_t id,
                                                 std::int64_t now_ms) const {
  auto r = lua::run(c, lua::Cancel{.later = later_,
                                   .done = done_,
                                   .streams = streams_,
                                   .prefix = prefix_,
                                   .task_id = id,
                                   .now_ms = now_ms});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != 2 || r->elements[0].type != Reply::Type::kInteger) {
    return unexpected("cancel", *r);
  }
  if (r->elements[0].integer < 0) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  return Cancelled{r->elements[0].integer == 1, r->elements[1].str};
}

Result<std::vector<bool>> TaskStream::cancel_asked(Connection& c,
                                                   const std::vector<std::uint64_t>& ids) const {
  for (const std::uint64_t id : ids) {
    SP_RETURN_IF_ERROR(c.append({"HGET", prefix_ + "task:" + std::to_string(id), "cancel"}));
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

Result<TaskStream::Retried> TaskStream::retry(Connection& c, const StreamEntry& e,
                                              const std::string& consumer,
                                              const std::vector<std::string>& attempts,
                                              std::uint32_t retries, const Backoff& backoff,
                                              std::int64_t now_ms) const {
  auto r = lua::run(c, lua::Retry{.stream = stream_of(e),
                                  .later = later_,
                                  .entry = e.entry_id,
                                  .consumer = consumer,
                                  .task_id = e.task_id,
                                  .prefix = prefix_,
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

Result<std::size_t> TaskStream::move_due(Connection& c, std::int64_t now_ms,
                                         std::size_t max) const {
  auto r = lua::run(c, lua::MoveDue{.later = later_,
                                    .streams = streams_,
                                    .done = done_,
                                    .prefix = prefix_,
                                    .now_ms = now_ms,
                                    .max = max});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("move_due", *r);
  return static_cast<std::size_t>(r->integer);
}

Result<std::size_t> TaskStream::trim_finished(Connection& c, std::int64_t now_ms,
                                              std::size_t max) const {
  auto r = lua::run(c, lua::TrimFinished{.done = done_,
                                         .done_bytes = done_bytes_,
                                         .prefix = prefix_,
                                         .oldest_kept_ms = now_ms - finished_max_age_ms_,
                                         .max_bytes = finished_max_bytes_,
                                         .max_evicted = max});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("trim_finished", *r);
  return static_cast<std::size_t>(r->integer);
}

Result<std::size_t> TaskStream::touch(
    Connection& c, const std::string& consumer,
    const std::vector<std::pair<Band, std::string>>& entries) const {
  std::size_t touched = 0;
  for (const Band b : kBands) {
    lua::Touch a{.stream = stream_key(b), .consumer = consumer};
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

Result<std::vector<StreamEntry>> TaskStream::claim_idle(Connection& c, const std::string& consumer,
                                                        std::chrono::milliseconds min_idle,
                                                        std::size_t max) const {
  // Not XAUTOCLAIM, which takes whatever is idle: an entry is claimed only when its node's
  // heartbeat key is gone too (a script per page of the pending list, looping over it).
  constexpr std::size_t kPage = 256;
  std::vector<StreamEntry> out;
  const std::string node_prefix = prefix_ + "node:";
  for (const Band b : kBands) {
    std::string start = "-";
    while (out.size() < max) {
      auto r = lua::run(c, lua::ClaimIdle{.stream = stream_key(b),
                                          .consumer = consumer,
                                          .min_idle_ms = min_idle.count(),
                                          .max = max - out.size(),
                                          .node_prefix = node_prefix,
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
    SP_RETURN_IF_ERROR(c.append({"XPENDING", stream_of(e), kGroup, e.entry_id, e.entry_id, "1"}));
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