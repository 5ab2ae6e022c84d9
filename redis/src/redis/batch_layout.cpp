// The batch-entry layout's keys and packed formats (batch_layout.hpp).
#include <sandpool/redis/batch_layout.hpp>

#include <limits>
#include <optional>
#include <utility>

namespace sandpool::redis::batch {
namespace {

// Little-endian fixed-width writes.
template <typename T>
void put_le(std::string& out, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>(u & 0xff));
    u = static_cast<U>(u >> 8);
  }
}

// Bytes preceded by their length as a `Len`; false when they do not fit it.
template <typename Len>
bool put_bytes(std::string& out, std::string_view s) {
  if (s.size() > std::numeric_limits<Len>::max()) return false;
  put_le(out, static_cast<Len>(s.size()));
  out.append(s);
  return true;
}

// Reads a packed string front to back; every read checks what is left first, and a failed
// one leaves the reader failed (each later read fails too).
class PackedReader {
 public:
  explicit PackedReader(std::string_view s) : s_(s) {}
  template <typename T>
  bool le(T* v) {
    if (failed_ || s_.size() < sizeof(T)) return fail();
    std::make_unsigned_t<T> u = 0;
    for (std::size_t i = sizeof(T); i-- > 0;) {
      u = static_cast<std::make_unsigned_t<T>>((u << 8) | static_cast<unsigned char>(s_[i]));
    }
    *v = static_cast<T>(u);
    s_.remove_prefix(sizeof(T));
    return true;
  }
  bool take(std::size_t n, std::string_view* out) {
    if (failed_ || s_.size() < n) return fail();
    *out = s_.substr(0, n);
    s_.remove_prefix(n);
    return true;
  }
  template <typename Len>
  bool bytes(std::string* out) {
    Len n = 0;
    std::string_view v;
    if (!le(&n) || !take(n, &v)) return false;
    out->assign(v);
    return true;
  }
  bool empty() const { return s_.empty(); }
  std::size_t left() const { return s_.size(); }

 private:
  bool fail() {
    failed_ = true;
    return false;
  }
  std::string_view s_;
  bool failed_ = false;
};

constexpr std::uint8_t kHasTimeout = 1, kHasRetries = 2;

Status malformed(const std::string& what) { return Status::protocol("batch layout: " + what); }

}  // namespace

BatchKeys::BatchKeys(const PoolKeys& keys)
    : prefix(keys.prefix),
      pool(keys.pool),
      ids(keys.ids),
      index(keys.prefix + "batches"),
      done(keys.prefix + keys.pool + ":bdone") {
  for (const Band b : kBands) {
    streams[PoolKeys::index_of(b)] = prefix + pool + ":b:" + std::to_string(b);
  }
}

std::string BatchKeys::batch_key(std::uint64_t first) const {
  return prefix + pool + ":batch:" + std::to_string(first);
}

std::string BatchKeys::ends_key(std::uint64_t first) const { return batch_key(first) + ":ends"; }

std::string BatchKeys::index_member(std::uint64_t first) const {
  return std::to_string(first) + ":" + pool;
}

Result<std::string> pack_tasks(const StreamTask* tasks, std::size_t count) {
  std::vector<const StreamTask*> each(count);
  for (std::size_t i = 0; i < count; ++i) each[i] = tasks + i;
  return pack_tasks(each.data(), count);
}

Result<std::string> pack_tasks(const StreamTask* const* tasks, std::size_t count) {
  if (count == 0 || count > kMaxTasks) {
    return Status::invalid("a batch holds 1 to " + std::to_string(kMaxTasks) + " tasks, not " +
                           std::to_string(count));
  }
  std::string out;
  put_le(out, kVersion);
  put_le(out, static_cast<std::uint16_t>(count));
  std::string body;
  for (std::size_t i = 0; i < count; ++i) {
    const StreamTask& t = *tasks[i];
    const TaskOptions& o = t.options;
    const std::string which = "task " + std::to_string(i) + " of the batch: ";
    if (t.type.empty()) return Status::invalid(which + "no type");
    if (o.not_before || !o.idempotency_key.empty()) {
      return Status::invalid(which + "a scheduled task or one with an idempotency key keeps " +
                             "the per-task layout");
    }
    if (o.timeout && o.timeout->count() < 0) return Status::invalid(which + "negative timeout");
    body.clear();
    put_le(body, static_cast<std::uint8_t>((o.timeout ? kHasTimeout : 0) |
                                           (o.retries ? kHasRetries : 0)));
    put_le(body, o.priority);
    put_le(body, static_cast<std::int64_t>(o.timeout ? o.timeout->count() : 0));
    put_le(body, o.retries.value_or(0));
    if (!put_bytes<std::uint16_t>(body, t.type) || !put_bytes<std::uint16_t>(body, o.key) ||
        !put_bytes<std::uint8_t>(body, o.tenant) || !put_bytes<std::uint32_t>(body, t.payload)) {
      return Status::invalid(which + "a field longer than its width");
    }
    if (out.size() + 4 + body.size() > kMaxBytes) {
      return Status::too_large("a batch's tasks take more than " + std::to_string(kMaxBytes) +
                               " bytes packed");
    }
    put_bytes<std::uint32_t>(out, body);
  }
  return out;
}

Result<std::vector<StreamTask>> unpack_tasks(std::string_view blob, std::size_t expect) {
  if (blob.size() > kMaxBytes) return malformed("packed tasks over " + std::to_string(kMaxBytes));
  PackedReader r(blob);
  std::uint8_t version = 0;
  std::uint16_t count = 0;
  if (!r.le(&version) || !r.le(&count)) return malformed("packed tasks truncated in the header");
  if (version != kVersion) return malformed("packed tasks of version " + std::to_string(version));
  if (count == 0 || count > kMaxTasks || count != expect) {
    return malformed("packed tasks count " + std::to_string(count) + ", the entry says " +
                     std::to_string(expect));
  }
  std::vector<StreamTask> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::string which = "task " + std::to_string(i) + ": ";
    std::uint32_t len = 0;
    std::string_view body;
    if (!r.le(&len) || !r.take(len, &body)) return malformed(which + "truncated or oversized");
    PackedReader b(body);
    std::uint8_t flags = 0;
    std::int64_t timeout_ms = 0;
    std::uint32_t retries = 0;
    StreamTask& t = out[i];
    TaskOptions& o = t.options;
    if (!b.le(&flags) || !b.le(&o.priority) || !b.le(&timeout_ms) || !b.le(&retries) ||
        !b.bytes<std::uint16_t>(&t.type) || !b.bytes<std::uint16_t>(&o.key) ||
        !b.bytes<std::uint8_t>(&o.tenant) || !b.bytes<std::uint32_t>(&t.payload)) {
      return malformed(which + "a field runs past its record");
    }
    if (!b.empty()) return malformed(which + std::to_string(b.left()) + " bytes after its fields");
    if ((flags & ~(kHasTimeout | kHasRetries)) != 0) return malformed(which + "unknown flags");
    if (t.type.empty()) return malformed(which + "no type");
    if (timeout_ms < 0) return malformed(which + "negative timeout");
    if (flags & kHasTimeout) o.timeout = std::chrono::milliseconds(timeout_ms);
    if (flags & kHasRetries) o.retries = retries;
  }
  if (!r.empty()) return malformed(std::to_string(r.left()) + " bytes after the last task");
  return out;
}

Status pack_end(const EndRecord& e, std::string& out) {
  if (e.index >= kMaxTasks) return Status::invalid("end record: index past a batch");
  std::string body;
  put_le(body, kVersion);
  put_le(body, static_cast<std::uint16_t>(e.index));
  put_le(body, static_cast<std::uint8_t>(e.kind));
  put_le(body, e.finished_ms);
  put_le(body, e.attempts);
  if (!put_bytes<std::uint8_t>(body, e.state) || !put_bytes<std::uint8_t>(body, e.reason) ||
      !put_bytes<std::uint32_t>(body, e.error) || !put_bytes<std::uint32_t>(body, e.result) ||
      e.attempt_log.size() > std::numeric_limits<std::uint16_t>::max()) {
    return Status::invalid("end record: a field longer than its width");
  }
  put_le(body, static_cast<std::uint16_t>(e.attempt_log.size()));
  for (const std::string& a : e.attempt_log) {
    if (!put_bytes<std::uint32_t>(body, a)) return Status::invalid("end record: attempt too long");
  }
  if (body.size() > kMaxEndBytes) {
    return Status::too_large("end record: " + std::to_string(body.size()) + " bytes, over " +
                             std::to_string(kMaxEndBytes) + " (its task moves out of the batch)");
  }
  put_bytes<std::uint32_t>(out, body);
  return Status::ok();
}

Result<std::vector<EndRecord>> unpack_ends(std::string_view blob, std::size_t tasks) {
  std::vector<EndRecord> out;
  PackedReader r(blob);
  while (!r.empty()) {
    const std::string which = "end record " + std::to_string(out.size()) + ": ";
    std::uint32_t len = 0;
    std::string_view body;
    if (!r.le(&len) || len > kMaxEndBytes || !r.take(len, &body)) {
      return malformed(which + "truncated or oversized");
    }
    PackedReader b(body);
    EndRecord e;
    std::uint8_t version = 0, kind = 0;
    std::uint16_t index = 0, n_attempts = 0;
    if (!b.le(&version)) return malformed(which + "empty");
    if (version != kVersion) return malformed(which + "of version " + std::to_string(version));
    if (!b.le(&index) || !b.le(&kind) || !b.le(&e.finished_ms) || !b.le(&e.attempts) ||
        !b.bytes<std::uint8_t>(&e.state) || !b.bytes<std::uint8_t>(&e.reason) ||
        !b.bytes<std::uint32_t>(&e.error) || !b.bytes<std::uint32_t>(&e.result) ||
        !b.le(&n_attempts)) {
      return malformed(which + "a field runs past its record");
    }
    // Each attempt takes at least its 4-byte length: a count past what is left is refused
    // before anything is reserved for it.
    if (n_attempts > b.left() / 4) return malformed(which + "more attempts than bytes");
    e.attempt_log.resize(n_attempts);
    for (std::string& a : e.attempt_log) {
      if (!b.bytes<std::uint32_t>(&a)) return malformed(which + "an attempt runs past it");
    }
    if (!b.empty()) return malformed(which + std::to_string(b.left()) + " bytes after its fields");
    // A batch holds at most kMaxTasks whatever `tasks` (read from Redis, as hostile as the
    // blob) says.
    if (index >= tasks || index >= kMaxTasks) {
      return malformed(which + "index " + std::to_string(index) + " of a batch of " +
                       std::to_string(tasks));
    }
    if (kind != static_cast<std::uint8_t>(EndRecord::Kind::kEnd) &&
        kind != static_cast<std::uint8_t>(EndRecord::Kind::kMoved)) {
      return malformed(which + "kind " + std::to_string(kind));
    }
    if (e.state.empty() && kind == static_cast<std::uint8_t>(EndRecord::Kind::kEnd)) {
      return malformed(which + "an end with no state");
    }
    e.index = index;
    e.kind = static_cast<EndRecord::Kind>(kind);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace sandpool::redis::batch
