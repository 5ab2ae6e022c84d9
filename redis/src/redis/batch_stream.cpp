// BatchStream (batch_stream.hpp): the batch-entry layout's submit, read, end and lookup.
#include <sandpool/redis/batch_stream.hpp>

#include "redis/batch_scripts.hpp"
#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

#include <utility>

namespace sandpool::redis {
namespace {

// A batch entry's field `name`, or nullptr.
const std::string* batch_field(const Reply& fields, std::string_view name) {
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return &fields.elements[i + 1].str;
  }
  return nullptr;
}

// An end map (a bit per task, task i at bit i % 8 of byte i / 8) as `n` flags; bytes past
// `n` tasks are ignored, missing ones read as no end.
std::vector<bool> end_map_bits(const std::string& map, std::size_t n) {
  std::vector<bool> out(n, false);
  for (std::size_t i = 0; i < n && i / 8 < map.size(); ++i) {
    out[i] = (static_cast<unsigned char>(map[i / 8]) >> (i % 8)) & 1u;
  }
  return out;
}

// A failed attempt that may be retried moves its task out to the per-task layout, which slice 3
// builds: until then a batch holds no task that has retries (a node would run it once and
// dead-letter it). kInvalidArgument naming the first such task.
Status without_retries(const std::vector<StreamTask>& tasks) {
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].options.retries.value_or(0) > 0) {
      return Status::invalid("batch submit: task " + std::to_string(i) +
                             " has retries, which the batch layout does not run yet (slice 3 of "
                             "docs/redis-batch-layout.md): submit it with retries 0, or per task");
    }
  }
  return Status::ok();
}

}  // namespace

Status BatchStream::ensure_group(Connection& c) const {
  // The id counter starts as the per-task layout's does (TaskUpkeep::ensure_group): a batch
  // submitted to a Redis no per-task pool ever used gets ids from PoolKeys::kFirstId too.
  auto ids = c.command({"SET", keys_.ids, std::to_string(PoolKeys::kFirstId - 1), "NX"});
  if (!ids) return ids.status();
  if (ids->is_error()) return ids->status();
  for (const std::string& stream : keys_.streams) {
    auto r = c.command({"XGROUP", "CREATE", stream, PoolKeys::kGroup, "0", "MKSTREAM"});
    if (!r) return r.status();
    if (r->is_error() && r->str.rfind("BUSYGROUP", 0) != 0) return r->status();
  }
  return Status::ok();
}

Result<BatchStream::Submitted> BatchStream::submit(Connection& c,
                                                   const std::vector<StreamTask>& tasks,
                                                   std::int64_t now_ms) const {
  // Per band, the tasks' positions in `tasks`; then each band's cut into batches, each packed
  // before anything is sent (a refused task sends nothing).
  SP_RETURN_IF_ERROR(without_retries(tasks));
  std::vector<std::size_t> of_band[3];
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    of_band[PoolKeys::index_of(band_of(tasks[i].options.priority))].push_back(i);
  }
  struct Batch {
    Band band;
    std::vector<std::size_t> at;
    std::string packed;
  };
  std::vector<Batch> batches;
  std::vector<const StreamTask*> chunk;
  for (const Band band : kBands) {
    const std::vector<std::size_t>& at = of_band[PoolKeys::index_of(band)];
    std::size_t i = 0;
    while (i < at.size()) {
      // As many as fit kMaxTasks and kMaxBytes (each task's record: its fields plus 24 bytes
      // of lengths and options).
      std::size_t bytes = 3, n = 0;
      chunk.clear();
      while (i + n < at.size() && n < batch::kMaxTasks) {
        const StreamTask& t = tasks[at[i + n]];
        const std::size_t more = 4 + 24 + t.type.size() + t.options.key.size() +
                                 t.options.tenant.size() + t.payload.size();
        if (n > 0 && bytes + more > batch::kMaxBytes) break;
        bytes += more;
        chunk.push_back(&t);
        ++n;
      }
      auto packed = batch::pack_tasks(chunk.data(), chunk.size());
      if (!packed) return packed.status();
      batches.push_back(Batch{band, std::vector<std::size_t>(at.begin() + i, at.begin() + i + n),
                              std::move(packed).value()});
      i += n;
    }
  }
  Submitted out;
  if (batches.empty()) return out;
  std::vector<Connection::Call> calls;
  calls.reserve(batches.size());
  for (const Batch& b : batches) {
    calls.push_back(lua::BatchSubmit{.ids = keys_.ids,
                                     .stream = keys_.stream_key(b.band),
                                     .index = keys_.index,
                                     .prefix = keys_.prefix,
                                     .pool = keys_.pool,
                                     .band = b.band,
                                     .now_ms = now_ms,
                                     .count = b.at.size(),
                                     .tasks = b.packed}
                        .call());
  }
  auto replies = c.eval_many(lua::BatchSubmit::kScript, calls);
  if (!replies) return outcome_lost(replies.status());
  if (replies->size() != calls.size()) return unexpected("batch_submit", Reply{});
  out.ids.resize(tasks.size());
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const Reply& r = (*replies)[k];
    if (r.is_error()) return r.status();
    if (r.elements.size() != 2 || r.elements[0].type != Reply::Type::kInteger ||
        r.elements[0].integer < static_cast<std::int64_t>(PoolKeys::kFirstId)) {
      return unexpected("batch_submit", r);
    }
    const auto first = static_cast<std::uint64_t>(r.elements[0].integer);
    for (std::size_t j = 0; j < batches[k].at.size(); ++j) out.ids[batches[k].at[j]] = first + j;
    out.entry_ids.push_back(r.elements[1].str);
  }
  return out;
}

BatchEntry BatchStream::parse_batch(const Reply& entry, Band band) const {
  BatchEntry e;
  e.band = band;
  auto refuse = [&](const std::string& why) {
    e.tasks.clear();
    e.malformed = "batch entry " + e.entry_id + " of " + keys_.stream_key(band) + ": " + why;
    return e;
  };
  if (entry.elements.size() != 2) return refuse("not an entry");
  e.entry_id = entry.elements[0].str;
  const Reply& fields = entry.elements[1];
  const std::string* v = batch_field(fields, "v");
  const std::string* first = batch_field(fields, "batch");
  const std::string* n = batch_field(fields, "n");
  const std::string* tasks = batch_field(fields, "tasks");
  if (!v || *v != "1") return refuse("not of version 1");
  std::size_t count = 0;
  if (!first || !parse_number(*first, &e.first) || e.first < PoolKeys::kFirstId ||
      e.first >= (std::uint64_t{1} << 53) - batch::kMaxTasks) {
    return refuse("no valid first id");
  }
  if (!n || !parse_number(*n, &count) || count == 0 || count > batch::kMaxTasks) {
    return refuse("no valid count");
  }
  if (!tasks) return refuse("no tasks");
  auto unpacked = batch::unpack_tasks(*tasks, count);
  if (!unpacked) return refuse(unpacked.status().message());
  e.tasks = std::move(unpacked).value();
  return e;
}

Result<std::vector<BatchEntry>> BatchStream::read(Connection& c, const std::string& consumer,
                                                  std::size_t count,
                                                  std::chrono::milliseconds block) const {
  std::vector<BatchEntry> out;
  if (count == 0) return out;
  auto read = read_group(c, consumer, keys_.streams, count, block);
  if (!read) return read.status();
  if (!*read) return out;  // nothing (within `block`)
  const std::optional<Reply>& w = *read;
  for (const Band band : kBands) {  // the higher bands first
    for (const Reply& stream : w->elements) {
      if (stream.elements.size() != 2) return unexpected("XREADGROUP", *w);
      if (stream.elements[0].str != keys_.stream_key(band)) continue;
      for (const Reply& entry : stream.elements[1].elements) {
        out.push_back(parse_batch(entry, band));
      }
    }
  }
  SP_RETURN_IF_ERROR(take(c, consumer, out));
  return out;
}

Status BatchStream::take(Connection& c, const std::string& consumer,
                         std::vector<BatchEntry>& out) const {
  lua::BatchTake take{
      .streams = keys_.streams, .prefix = keys_.prefix, .pool = keys_.pool, .consumer = consumer};
  std::vector<std::size_t> taken;  // positions in `out` of the entries sent
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].malformed.empty()) continue;
    take.entries.push_back({out[i].band, out[i].entry_id, out[i].first});
    taken.push_back(i);
  }
  if (taken.empty()) return Status::ok();
  auto r = lua::run(c, take);
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->elements.size() != taken.size()) return unexpected("batch_take", *r);
  std::vector<bool> keep(out.size(), true);
  for (std::size_t k = 0; k < taken.size(); ++k) {
    const Reply& one = r->elements[k];
    BatchEntry& e = out[taken[k]];
    if (one.type == Reply::Type::kInteger) {
      keep[taken[k]] = false;  // not this consumer's
    } else if (one.type == Reply::Type::kString) {
      e.ended = end_map_bits(one.str, e.tasks.size());
    } else {
      return unexpected("batch_take", *r);
    }
  }
  std::vector<BatchEntry> mine;
  mine.reserve(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (keep[i]) mine.push_back(std::move(out[i]));
  }
  out = std::move(mine);
  return Status::ok();
}

Result<Fenced> BatchStream::discard(Connection& c, const BatchEntry& e,
                                    const std::string& consumer) const {
  auto r = lua::run(
      c,
      lua::Discard{.stream = keys_.stream_key(e.band), .entry = e.entry_id, .consumer = consumer});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("discard", *r);
  return r->integer == 1 ? Fenced::kDone : Fenced::kNotYours;
}

Result<BatchStream::Ended> BatchStream::end(Connection& c, const BatchEntry& e,
                                            const std::string& consumer,
                                            const std::vector<batch::EndRecord>& ends,
                                            std::int64_t now_ms) const {
  if (ends.empty()) return Ended{};
  auto one =
      end_many(c, consumer, {BatchEnds{e.entry_id, e.band, e.first, e.tasks.size(), ends}}, now_ms);
  if (!one) return one.status();
  return std::move(one->front());
}

Result<std::vector<BatchStream::Ended>> BatchStream::end_many(Connection& c,
                                                              const std::string& consumer,
                                                              const std::vector<BatchEnds>& batches,
                                                              std::int64_t now_ms) const {
  std::vector<Connection::Call> calls;
  calls.reserve(batches.size());
  for (const BatchEnds& b : batches) {
    std::string records;
    for (const batch::EndRecord& r : b.ends) {
      if (r.index >= b.n) return Status::invalid("end: an index past the batch");
      SP_RETURN_IF_ERROR(batch::pack_end(r, records));
    }
    calls.push_back(lua::BatchEnd{.stream = keys_.stream_key(b.band),
                                  .batch = keys_.batch_key(b.first),
                                  .ends = keys_.ends_key(b.first),
                                  .done = keys_.done,
                                  .consumer = consumer,
                                  .entry = b.entry_id,
                                  .first = b.first,
                                  .now_ms = now_ms,
                                  .records = records}
                        .call());
  }
  std::vector<Ended> out(batches.size());
  if (calls.empty()) return out;
  auto replies = c.eval_many(lua::BatchEnd::kScript, calls);
  if (!replies) return replies.status();
  if (replies->size() != calls.size()) return unexpected("batch_end", Reply{});
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const Reply& r = (*replies)[k];
    if (r.is_error()) return r.status();
    const auto& el = r.elements;
    if (el.empty() || el[0].type != Reply::Type::kInteger) return unexpected("batch_end", r);
    if (el[0].integer == 0) continue;  // not this consumer's: nothing written
    if (el.size() != 2 + batches[k].ends.size()) return unexpected("batch_end", r);
    out[k].fenced = Fenced::kDone;
    out[k].acked = el[1].integer == 1;
    for (std::size_t i = 0; i < batches[k].ends.size(); ++i) {
      out[k].written.push_back(el[2 + i].integer == 1);
    }
  }
  return out;
}

Result<std::size_t> BatchStream::touch(
    Connection& c, const std::string& consumer,
    const std::vector<std::pair<Band, std::string>>& entries) const {
  return lua::touch_in_bands(c, keys_.streams, consumer, entries);
}

Result<std::vector<BatchEntry>> BatchStream::claim_idle(Connection& c, const std::string& consumer,
                                                        std::chrono::milliseconds min_idle,
                                                        std::size_t max) const {
  constexpr std::size_t kPage = 256;
  std::vector<BatchEntry> out;
  for (const Band b : kBands) {
    std::string start = "-";
    while (out.size() < max) {
      auto r = lua::run(c, lua::ClaimIdle{.stream = keys_.stream_key(b),
                                          .consumer = consumer,
                                          .min_idle_ms = min_idle.count(),
                                          .max = max - out.size(),
                                          .node_prefix = node_prefix_,
                                          .start = start,
                                          .page = kPage});
      if (!r) return r.status();
      if (r->is_error()) return r->status();
      if (r->elements.size() != 2) return unexpected("claim_idle", *r);
      for (const Reply& entry : r->elements[1].elements) {
        if (entry.elements.size() == 2) out.push_back(parse_batch(entry, b));
      }
      const std::string& last = r->elements[0].str;
      if (last.empty() || out.size() >= max) break;
      start = "(" + last;
    }
  }
  SP_RETURN_IF_ERROR(take(c, consumer, out));
  return out;
}

Result<std::optional<TaskInBatch>> BatchStream::lookup(Connection& c, std::uint64_t id) const {
  auto r =
      lua::run(c, lua::BatchLookup{.index = keys_.index, .prefix = keys_.prefix, .task_id = id});
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kArray) return unexpected("batch_lookup", *r);
  if (r->elements.empty()) return std::optional<TaskInBatch>();
  const auto& f = r->elements;
  if (f.size() != 8) return unexpected("batch_lookup", *r);
  TaskInBatch t;
  t.id = id;
  std::size_t n = 0;
  if (!parse_number(f[1].str, &t.first) || !parse_number(f[2].str, &n) || n > batch::kMaxTasks ||
      id < t.first || id - t.first >= n) {
    return Status::protocol("batch_lookup: batch " + f[1].str + " of task " + std::to_string(id) +
                            " is malformed");
  }
  t.index = static_cast<std::uint32_t>(id - t.first);
  t.pool = f[0].str;
  t.state = f[3].str;
  t.node = f[4].str;
  t.entry_id = f[5].str;
  if (!f[6].str.empty() && !parse_number(f[6].str, &t.submitted_ms)) {
    return Status::protocol("batch_lookup: batch " + f[1].str + ": submitted_ms malformed");
  }
  if (!f[7].str.empty()) {
    auto ends = batch::unpack_ends(f[7].str, n);
    if (!ends) return ends.status();
    if (ends->size() != 1 || ends->front().index != t.index) {
      return Status::protocol("batch_lookup: task " + std::to_string(id) + "'s record is not its");
    }
    t.end = std::move(ends->front());
    t.state = t.end->kind == batch::EndRecord::Kind::kMoved ? "moved" : t.end->state;
  }
  return std::optional<TaskInBatch>(std::move(t));
}

}  // namespace sandpool::redis
