// The round log's record codec (journal_records.hpp). Enumerations are one byte each, their
// values pinned below so that reordering an enum breaks the build instead of changing what a
// journal file means. Format 2 is written (docs/journal.md, "Records"); format 1, fixed-width
// fields, is still read, for the logs written before it.
#include "retry/journal_records.hpp"

#include <limits>
#include <utility>
#include <vector>

namespace sandpool::journal_log {
namespace {

using ipc::wire::BoundedInputArchive;
using ipc::wire::DecodeError;

static_assert(static_cast<int>(TaskState::kQueued) == 0 &&
              static_cast<int>(TaskState::kRunning) == 2 &&
              static_cast<int>(TaskState::kRetryWait) == 3 &&
              static_cast<int>(TaskState::kCompleted) == 4 &&
              static_cast<int>(TaskState::kDeadLettered) == 5 &&
              static_cast<int>(TaskState::kCancelled) == 6);
static_assert(static_cast<int>(Outcome::kOk) == 0 && static_cast<int>(Outcome::kError) == 1 &&
              static_cast<int>(Outcome::kFailed) == 2 &&
              static_cast<int>(Outcome::kTimedOut) == 3 && static_cast<int>(Outcome::kLost) == 4 &&
              static_cast<int>(Outcome::kSandboxViolation) == 5 &&
              static_cast<int>(Outcome::kResourceLimit) == 6 &&
              static_cast<int>(Outcome::kProtocolError) == 7 &&
              static_cast<int>(Outcome::kCancelled) == 8);
static_assert(static_cast<int>(DeadReason::kNone) == 0 &&
              static_cast<int>(DeadReason::kPermanent) == 1 &&
              static_cast<int>(DeadReason::kRetriesExhausted) == 2 &&
              static_cast<int>(DeadReason::kCrashLoop) == 3 &&
              static_cast<int>(DeadReason::kExpired) == 4 &&
              static_cast<int>(DeadReason::kShutdown) == 5 &&
              static_cast<int>(DeadReason::kPoolRemoved) == 6 &&
              static_cast<int>(DeadReason::kRejected) == 7);
static_assert(static_cast<int>(CancelReason::kNone) == 0 &&
              static_cast<int>(CancelReason::kUser) == 1 &&
              static_cast<int>(CancelReason::kShutdown) == 2);

template <typename T>
T get(BoundedInputArchive& ar, const char* field) {
  ar.set_field(field);
  T v{};
  ar(v);
  return v;
}
std::string get_str(BoundedInputArchive& ar, const char* field) {
  const auto len = get<std::uint32_t>(ar, field);
  const std::string_view bytes = ar.take(len);  // throws when fewer remain: nothing allocated
  return std::string(bytes);
}
std::optional<std::chrono::milliseconds> get_opt_ms(BoundedInputArchive& ar, const char* field) {
  const auto has = get<std::uint8_t>(ar, field);
  const auto ms = get<std::int64_t>(ar, field);
  if (has == 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}
template <typename E>
E get_enum(BoundedInputArchive& ar, const char* field, E last) {
  const auto v = get<std::uint8_t>(ar, field);
  if (v > static_cast<std::uint8_t>(last)) {
    throw DecodeError(field, "unknown value " + std::to_string(v));
  }
  return static_cast<E>(v);
}

// ---- format 1: fixed-width little-endian fields, strings as a u32 length and the bytes

Attempt get_attempt(BoundedInputArchive& ar) {
  Attempt a;
  a.number = get<std::uint32_t>(ar, "attempt number");
  a.outcome = get_enum(ar, "attempt outcome", Outcome::kCancelled);
  a.error = get_str(ar, "attempt error");
  a.worker_pid = get<std::int32_t>(ar, "attempt worker_pid");
  a.started_ms = get<std::int64_t>(ar, "attempt started_ms");
  a.ended_ms = get<std::int64_t>(ar, "attempt ended_ms");
  a.backtrace = get_str(ar, "attempt backtrace");
  return a;
}

void get_task(BoundedInputArchive& ar, JournalTask& t) {
  t.task.id = get<std::uint64_t>(ar, "id");
  t.pool = get_str(ar, "pool");
  t.task.type = get_str(ar, "type");
  t.payload = get_str(ar, "payload");
  t.options.timeout = get_opt_ms(ar, "timeout");
  const auto has_retries = get<std::uint8_t>(ar, "retries");
  const auto retries = get<std::uint32_t>(ar, "retries");
  if (has_retries != 0) t.options.retries = retries;
  t.options.priority = get<std::int32_t>(ar, "priority");
  t.options.key = get_str(ar, "key");
  t.options.queue_ttl = get_opt_ms(ar, "queue_ttl");
  t.options.fail_fast = get<std::uint8_t>(ar, "fail_fast") != 0;
  t.options.idempotency_key = get_str(ar, "idempotency_key");
  t.submitted_ms = get<std::int64_t>(ar, "submitted_ms");
  t.task.state = get_enum(ar, "state", TaskState::kCancelled);
  t.task.reason = get_enum(ar, "reason", DeadReason::kRejected);
  t.task.cancel_reason = get_enum(ar, "cancel_reason", CancelReason::kShutdown);
  t.task.result = get_str(ar, "result");
  t.task.error = get_str(ar, "error");
  if (get<std::uint8_t>(ar, "running") != 0) t.running = get_attempt(ar);
  t.retry_due_ms = get<std::int64_t>(ar, "retry_due_ms");
  t.finished_ms = get<std::int64_t>(ar, "finished_ms");
  t.letter_id = get<std::uint64_t>(ar, "letter_id");
  const auto attempts = get<std::uint32_t>(ar, "history");
  // Every attempt takes more than 32 bytes: a count beyond that is a lie, caught before any
  // allocation.
  if (attempts > ar.remaining() / 32) throw DecodeError("history", "too many attempts");
  t.task.history.reserve(attempts);
  for (std::uint32_t i = 0; i < attempts; ++i) t.task.history.push_back(get_attempt(ar));
}

void read_v1(BoundedInputArchive& ar, Record& r) {
  r.kind = static_cast<RecordKind>(get<std::uint8_t>(ar, "kind"));
  switch (r.kind) {
    case RecordKind::kTask:
      get_task(ar, r.task);
      r.id = r.task.task.id;
      break;
    case RecordKind::kStart:
      r.id = get<std::uint64_t>(ar, "id");
      r.attempt.number = get<std::uint32_t>(ar, "start number");
      r.attempt.worker_pid = get<std::int32_t>(ar, "start worker_pid");
      r.attempt.started_ms = get<std::int64_t>(ar, "start started_ms");
      r.at_ms = get<std::int64_t>(ar, "at_ms");
      break;
    case RecordKind::kRequeue:
      r.id = get<std::uint64_t>(ar, "id");
      r.at_ms = get<std::int64_t>(ar, "at_ms");
      break;
    case RecordKind::kAttempt:
      r.id = get<std::uint64_t>(ar, "id");
      r.attempt = get_attempt(ar);
      r.next = get_enum(ar, "next", TaskState::kCancelled);
      r.retry_due_ms = get<std::int64_t>(ar, "retry_due_ms");
      r.at_ms = get<std::int64_t>(ar, "at_ms");
      break;
    default:
      throw DecodeError("kind", "unknown record kind " + std::to_string(static_cast<int>(r.kind)));
  }
}

// ---- format 2: varints, times as deltas from the body's base, fields present by flags
//
// An unsigned integer is a LEB128 varint (7 bits a byte, low first, at most 10 bytes); a
// signed one is zigzag-mapped first; a time is a signed varint of its distance from the
// body's base time (an i64 after the format byte: the first time the body holds); a string
// is a varint length and the bytes. A task record's pool and type are string references: 0
// and a string, which joins the body's table, or 1 + an index into that table. A task record
// names the fields it holds in a flags varint; the others are empty, zero or unset.

// The bits of the fields nearly every task has come first: they fit the flags' first byte.
enum TaskField : std::uint32_t {
  kPayload = 1u << 0,
  kSubmitted = 1u << 1,
  kResult = 1u << 2,
  kHistory = 1u << 3,
  kFinished = 1u << 4,
  kError = 1u << 5,
  kRunning = 1u << 6,
  kTimeout = 1u << 7,
  kRetries = 1u << 8,
  kPriority = 1u << 9,
  kKey = 1u << 10,
  kQueueTtl = 1u << 11,
  kFailFast = 1u << 12,
  kIdempotencyKey = 1u << 13,
  kReason = 1u << 14,
  kCancelReason = 1u << 15,
  kRetryDue = 1u << 16,
  kLetter = 1u << 17,
  kNotBefore = 1u << 18,  // since 2026-11-27: scheduled tasks (TaskOptions::not_before)
  kTenant = 1u << 19,     // since 2026-11-27: TaskOptions::tenant
  kAllTaskFields = (1u << 20) - 1,
};

enum AttemptField : std::uint8_t {
  kAttemptError = 1u << 0,
  kAttemptBacktrace = 1u << 1,
  kAttemptStarted = 1u << 2,
  kAttemptEnded = 1u << 3,
  kAllAttemptFields = (1u << 4) - 1,
};

constexpr std::uint8_t kHasRetryDue = 0x80;  // an attempt record's next-state byte
constexpr std::size_t kMaxTable = 64;        // strings a body's table holds

std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

class Reader {
 public:
  explicit Reader(BoundedInputArchive& ar) : ar_(ar) {}
  std::uint8_t byte(const char* field) { return get<std::uint8_t>(ar_, field); }
  std::uint64_t varint(const char* field) {
    ar_.set_field(field);
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = static_cast<std::uint8_t>(ar_.take(1)[0]);
      if (shift == 63 && b > 1) break;  // more than 64 bits
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw DecodeError(field, "varint longer than 64 bits");
  }
  template <typename T>
  T bounded(const char* field) {
    const std::uint64_t v = varint(field);
    if (v > std::numeric_limits<T>::max()) throw DecodeError(field, "out of range");
    return static_cast<T>(v);
  }
  std::int64_t signed_varint(const char* field) { return unzigzag(varint(field)); }
  std::int32_t int32(const char* field) {
    const std::int64_t v = signed_varint(field);
    if (v < std::numeric_limits<std::int32_t>::min() ||
        v > std::numeric_limits<std::int32_t>::max()) {
      throw DecodeError(field, "out of range");
    }
    return static_cast<std::int32_t>(v);
  }
  std::int64_t time(const char* field) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(base_) +
                                     static_cast<std::uint64_t>(signed_varint(field)));
  }
  std::string_view bytes(const char* field) {
    return ar_.take(varint(field));  // throws when fewer remain, naming the field
  }
  std::string str(const char* field) { return std::string(bytes(field)); }
  std::string ref(const char* field) {
    const std::uint64_t r = varint(field);
    if (r == 0) {
      const std::string_view s = bytes(field);
      if (table_.size() < kMaxTable) table_.push_back(s);
      return std::string(s);
    }
    if (r > table_.size())
      throw DecodeError(field, "unknown string reference " + std::to_string(r));
    return std::string(table_[r - 1]);
  }
  template <typename E>
  E enumerated(const char* field, E last) {
    return get_enum(ar_, field, last);
  }
  void set_base(std::int64_t base) { base_ = base; }
  std::size_t remaining() const { return ar_.remaining(); }

 private:
  BoundedInputArchive& ar_;
  std::int64_t base_ = 0;
  std::vector<std::string_view> table_;
};

Attempt read_attempt(Reader& in) {
  Attempt a;
  a.number = in.bounded<std::uint32_t>("attempt number");
  a.outcome = in.enumerated("attempt outcome", Outcome::kCancelled);
  const std::uint8_t has = in.byte("attempt fields");
  if ((has & ~kAllAttemptFields) != 0) throw DecodeError("attempt fields", "unknown fields");
  a.worker_pid = in.int32("attempt worker_pid");
  if ((has & kAttemptStarted) != 0) a.started_ms = in.time("attempt started_ms");
  if ((has & kAttemptEnded) != 0) a.ended_ms = in.time("attempt ended_ms");
  if ((has & kAttemptError) != 0) a.error = in.str("attempt error");
  if ((has & kAttemptBacktrace) != 0) a.backtrace = in.str("attempt backtrace");
  return a;
}

void read_task(Reader& in, JournalTask& t) {
  t.task.id = in.varint("id");
  const std::uint64_t has = in.varint("fields");
  if ((has & ~std::uint64_t{kAllTaskFields}) != 0) throw DecodeError("fields", "unknown fields");
  t.pool = in.ref("pool");
  t.task.type = in.ref("type");
  t.task.state = in.enumerated("state", TaskState::kCancelled);
  if ((has & kPayload) != 0) t.payload = in.str("payload");
  if ((has & kTimeout) != 0)
    t.options.timeout = std::chrono::milliseconds(in.signed_varint("timeout"));
  if ((has & kRetries) != 0) t.options.retries = in.bounded<std::uint32_t>("retries");
  if ((has & kPriority) != 0) t.options.priority = in.int32("priority");
  if ((has & kKey) != 0) t.options.key = in.str("key");
  if ((has & kQueueTtl) != 0) {
    t.options.queue_ttl = std::chrono::milliseconds(in.signed_varint("queue_ttl"));
  }
  t.options.fail_fast = (has & kFailFast) != 0;
  if ((has & kIdempotencyKey) != 0) t.options.idempotency_key = in.str("idempotency_key");
  if ((has & kSubmitted) != 0) t.submitted_ms = in.time("submitted_ms");
  if ((has & kReason) != 0) t.task.reason = in.enumerated("reason", DeadReason::kRejected);
  if ((has & kCancelReason) != 0) {
    t.task.cancel_reason = in.enumerated("cancel_reason", CancelReason::kShutdown);
  }
  if ((has & kResult) != 0) t.task.result = in.str("result");
  if ((has & kError) != 0) t.task.error = in.str("error");
  if ((has & kRunning) != 0) t.running = read_attempt(in);
  if ((has & kRetryDue) != 0) t.retry_due_ms = in.time("retry_due_ms");
  if ((has & kFinished) != 0) t.finished_ms = in.time("finished_ms");
  if ((has & kLetter) != 0) t.letter_id = in.varint("letter_id");
  if ((has & kNotBefore) != 0) {
    // 0 (which an older journal may hold) is not scheduled, as at the write.
    const std::int64_t ms = in.time("not_before_ms");
    if (ms != 0 && !t.options.set_not_before_ms(ms))
      throw DecodeError("not_before_ms", "out of range");
  }
  if ((has & kTenant) != 0) t.options.tenant = in.str("tenant");
  if ((has & kHistory) != 0) {
    const std::uint64_t attempts = in.varint("history");
    // Every attempt takes at least 4 bytes: a count beyond that is a lie, caught before any
    // allocation.
    if (attempts > in.remaining() / 4) throw DecodeError("history", "too many attempts");
    t.task.history.reserve(attempts);
    for (std::uint64_t i = 0; i < attempts; ++i) t.task.history.push_back(read_attempt(in));
  }
}

void read_v2(Reader& in, Record& r) {
  r.kind = static_cast<RecordKind>(in.byte("kind"));
  switch (r.kind) {
    case RecordKind::kTask:
      read_task(in, r.task);
      r.id = r.task.task.id;
      break;
    case RecordKind::kStart:
      r.id = in.varint("id");
      r.attempt.number = in.bounded<std::uint32_t>("start number");
      r.attempt.worker_pid = in.int32("start worker_pid");
      r.attempt.started_ms = in.time("start started_ms");
      r.at_ms = in.time("at_ms");
      break;
    case RecordKind::kRequeue:
      r.id = in.varint("id");
      r.at_ms = in.time("at_ms");
      break;
    case RecordKind::kAttempt: {
      r.id = in.varint("id");
      r.attempt = read_attempt(in);
      const std::uint8_t next = in.byte("next");
      if ((next & ~kHasRetryDue) > static_cast<std::uint8_t>(TaskState::kCancelled)) {
        throw DecodeError("next", "unknown value " + std::to_string(next));
      }
      r.next = static_cast<TaskState>(next & ~kHasRetryDue);
      if ((next & kHasRetryDue) != 0) r.retry_due_ms = in.time("retry_due_ms");
      r.at_ms = in.time("at_ms");
      break;
    }
    default:
      throw DecodeError("kind", "unknown record kind " + std::to_string(static_cast<int>(r.kind)));
  }
}

}  // namespace

void BodyWriter::reset(std::string* out) {
  out_ = out;
  out_->clear();
  out_->push_back(static_cast<char>(kFormat));
  out_->append(kHeaderBytes - 1, '\0');  // the base time, set by the first time written
  base_ = 0;
  has_base_ = false;
  table_.clear();
}

void BodyWriter::varint(std::uint64_t v) {
  char buf[10];
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out_->append(buf, n);
}

void BodyWriter::signed_varint(std::int64_t v) { varint(zigzag(v)); }

void BodyWriter::time(std::int64_t ms) {
  if (!has_base_) {
    has_base_ = true;
    base_ = ms;
    const auto u = static_cast<std::uint64_t>(ms);
    for (std::size_t i = 0; i < 8; ++i) (*out_)[1 + i] = static_cast<char>(u >> (8 * i));
  }
  signed_varint(static_cast<std::int64_t>(static_cast<std::uint64_t>(ms) -
                                          static_cast<std::uint64_t>(base_)));
}

void BodyWriter::str(std::string_view s) {
  varint(s.size());
  out_->append(s);
}

void BodyWriter::ref(std::string_view s) {
  for (std::size_t i = 0; i < table_.size(); ++i) {
    const auto [at, len] = table_[i];
    if (len == s.size() && out_->compare(at, len, s) == 0) return varint(i + 1);
  }
  varint(0);
  varint(s.size());
  if (table_.size() < kMaxTable) table_.emplace_back(out_->size(), s.size());
  out_->append(s);
}

void BodyWriter::attempt_fields(const Attempt& a) {
  varint(a.number);
  out_->push_back(static_cast<char>(a.outcome));
  std::uint8_t has = 0;
  if (!a.error.empty()) has |= kAttemptError;
  if (!a.backtrace.empty()) has |= kAttemptBacktrace;
  if (a.started_ms != 0) has |= kAttemptStarted;
  if (a.ended_ms != 0) has |= kAttemptEnded;
  out_->push_back(static_cast<char>(has));
  signed_varint(a.worker_pid);
  if (a.started_ms != 0) time(a.started_ms);
  if (a.ended_ms != 0) time(a.ended_ms);
  if (!a.error.empty()) str(a.error);
  if (!a.backtrace.empty()) str(a.backtrace);
}

void BodyWriter::task(const JournalTask& t) {
  const TaskOptions& o = t.options;
  std::uint32_t has = 0;
  if (!t.payload.empty()) has |= kPayload;
  if (o.timeout) has |= kTimeout;
  if (o.retries) has |= kRetries;
  if (o.priority != 0) has |= kPriority;
  if (!o.key.empty()) has |= kKey;
  if (o.queue_ttl) has |= kQueueTtl;
  if (o.fail_fast) has |= kFailFast;
  if (!o.idempotency_key.empty()) has |= kIdempotencyKey;
  if (t.submitted_ms != 0) has |= kSubmitted;
  if (t.task.reason != DeadReason::kNone) has |= kReason;
  if (t.task.cancel_reason != CancelReason::kNone) has |= kCancelReason;
  if (!t.task.result.empty()) has |= kResult;
  if (!t.task.error.empty()) has |= kError;
  if (t.running) has |= kRunning;
  if (t.retry_due_ms != 0) has |= kRetryDue;
  if (t.finished_ms != 0) has |= kFinished;
  if (t.letter_id != 0) has |= kLetter;
  const std::int64_t not_before_ms = o.not_before_ms().value_or(0);  // 0: not scheduled
  if (not_before_ms != 0) has |= kNotBefore;
  if (!o.tenant.empty()) has |= kTenant;
  if (!t.task.history.empty()) has |= kHistory;

  out_->push_back(static_cast<char>(RecordKind::kTask));
  varint(t.task.id);
  varint(has);
  ref(t.pool);
  ref(t.task.type);
  out_->push_back(static_cast<char>(t.task.state));
  if ((has & kPayload) != 0) str(t.payload);
  if (o.timeout) signed_varint(o.timeout->count());
  if (o.retries) varint(*o.retries);
  if (o.priority != 0) signed_varint(o.priority);
  if (!o.key.empty()) str(o.key);
  if (o.queue_ttl) signed_varint(o.queue_ttl->count());
  if (!o.idempotency_key.empty()) str(o.idempotency_key);
  if (t.submitted_ms != 0) time(t.submitted_ms);
  if ((has & kReason) != 0) out_->push_back(static_cast<char>(t.task.reason));
  if ((has & kCancelReason) != 0) out_->push_back(static_cast<char>(t.task.cancel_reason));
  if (!t.task.result.empty()) str(t.task.result);
  if (!t.task.error.empty()) str(t.task.error);
  if (t.running) attempt_fields(*t.running);
  if (t.retry_due_ms != 0) time(t.retry_due_ms);
  if (t.finished_ms != 0) time(t.finished_ms);
  if (t.letter_id != 0) varint(t.letter_id);
  if (not_before_ms != 0) time(not_before_ms);
  if (!o.tenant.empty()) str(o.tenant);
  if (!t.task.history.empty()) {
    varint(t.task.history.size());
    for (const Attempt& a : t.task.history) attempt_fields(a);
  }
}

void BodyWriter::start(std::uint64_t id, const Attempt& start, std::int64_t at_ms) {
  out_->push_back(static_cast<char>(RecordKind::kStart));
  varint(id);
  varint(start.number);
  signed_varint(start.worker_pid);
  time(start.started_ms);
  time(at_ms);
}

void BodyWriter::requeue(std::uint64_t id, std::int64_t at_ms) {
  out_->push_back(static_cast<char>(RecordKind::kRequeue));
  varint(id);
  time(at_ms);
}

void BodyWriter::attempt(std::uint64_t id, const Attempt& ended, TaskState next,
                         std::int64_t retry_due_ms, std::int64_t at_ms) {
  out_->push_back(static_cast<char>(RecordKind::kAttempt));
  varint(id);
  attempt_fields(ended);
  const auto state = static_cast<std::uint8_t>(next);
  out_->push_back(static_cast<char>(retry_due_ms != 0 ? state | kHasRetryDue : state));
  if (retry_due_ms != 0) time(retry_due_ms);
  time(at_ms);
}

Status decode(std::string_view body, const std::function<void(Record&)>& on_record) {
  BoundedInputArchive ar;
  ar.rebind(body);
  std::size_t index = 0;
  try {
    const auto format = get<std::uint8_t>(ar, "format");
    if (format != 1 && format != kFormat) {
      return Status::error(Code::kInternal, "journal round: unknown format " +
                                                std::to_string(format) +
                                                " (this sandpool reads 1 "
                                                "and " +
                                                std::to_string(kFormat) + ")");
    }
    Reader in(ar);
    if (format == kFormat) in.set_base(get<std::int64_t>(ar, "base time"));
    Record r;
    while (ar.remaining() > 0) {
      r = Record{};
      const std::size_t before = ar.remaining();
      if (format == kFormat) {
        read_v2(in, r);
      } else {
        read_v1(ar, r);
      }
      r.bytes = before - ar.remaining();
      on_record(r);
      ++index;
    }
  } catch (const DecodeError& e) {
    return Status::error(Code::kInternal, "journal round: record " + std::to_string(index) + ": " +
                                              e.field() + ": " + e.what());
  }
  return Status::ok();
}

}  // namespace sandpool::journal_log
