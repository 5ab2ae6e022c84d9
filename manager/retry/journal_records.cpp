// The round log's record codec (journal_records.hpp). Strings are a u32 length and the
// bytes; enumerations one byte each, their values pinned below so that reordering an enum
// breaks the build instead of changing what a journal file means.
#include "retry/journal_records.hpp"

namespace sandpool::journal_log {
namespace {

using ipc::wire::BoundedInputArchive;
using ipc::wire::DecodeError;
using ipc::wire::StringOutputArchive;

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
              static_cast<int>(DeadReason::kPoolRemoved) == 6);
static_assert(static_cast<int>(CancelReason::kNone) == 0 &&
              static_cast<int>(CancelReason::kUser) == 1 &&
              static_cast<int>(CancelReason::kShutdown) == 2);

template <typename T>
void put(StringOutputArchive& ar, T v) {
  ar(v);
}
void put_str(StringOutputArchive& ar, std::string_view s) {
  ar(static_cast<std::uint32_t>(s.size()));
  ar.saveBinary(s.data(), s.size());
}
template <typename E>
void put_enum(StringOutputArchive& ar, E e) {
  ar(static_cast<std::uint8_t>(e));
}
void put_kind(StringOutputArchive& ar, RecordKind k) { ar(static_cast<std::uint8_t>(k)); }
void put_opt_ms(StringOutputArchive& ar, const std::optional<std::chrono::milliseconds>& v) {
  put<std::uint8_t>(ar, v ? 1 : 0);
  put<std::int64_t>(ar, v ? v->count() : 0);
}

void put_attempt(StringOutputArchive& ar, const Attempt& a) {
  put<std::uint32_t>(ar, a.number);
  put_enum(ar, a.outcome);
  put_str(ar, a.error);
  put<std::int32_t>(ar, a.worker_pid);
  put<std::int64_t>(ar, a.started_ms);
  put<std::int64_t>(ar, a.ended_ms);
  put_str(ar, a.backtrace);
}

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
  t.task.reason = get_enum(ar, "reason", DeadReason::kPoolRemoved);
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

}  // namespace

void BodyWriter::reset(std::string* out) {
  out_ = out;
  out_->clear();
  ar_.rebind(out_);
  put<std::uint8_t>(ar_, kFormat);
}

void BodyWriter::task(const JournalTask& t) {
  put_kind(ar_, RecordKind::kTask);
  put<std::uint64_t>(ar_, t.task.id);
  put_str(ar_, t.pool);
  put_str(ar_, t.task.type);
  put_str(ar_, t.payload);
  put_opt_ms(ar_, t.options.timeout);
  put<std::uint8_t>(ar_, t.options.retries ? 1 : 0);
  put<std::uint32_t>(ar_, t.options.retries.value_or(0));
  put<std::int32_t>(ar_, t.options.priority);
  put_str(ar_, t.options.key);
  put_opt_ms(ar_, t.options.queue_ttl);
  put<std::uint8_t>(ar_, t.options.fail_fast ? 1 : 0);
  put_str(ar_, t.options.idempotency_key);
  put<std::int64_t>(ar_, t.submitted_ms);
  put_enum(ar_, t.task.state);
  put_enum(ar_, t.task.reason);
  put_enum(ar_, t.task.cancel_reason);
  put_str(ar_, t.task.result);
  put_str(ar_, t.task.error);
  put<std::uint8_t>(ar_, t.running ? 1 : 0);
  if (t.running) put_attempt(ar_, *t.running);
  put<std::int64_t>(ar_, t.retry_due_ms);
  put<std::int64_t>(ar_, t.finished_ms);
  put<std::uint64_t>(ar_, t.letter_id);
  put<std::uint32_t>(ar_, static_cast<std::uint32_t>(t.task.history.size()));
  for (const Attempt& a : t.task.history) put_attempt(ar_, a);
}

void BodyWriter::start(std::uint64_t id, const Attempt& start, std::int64_t at_ms) {
  put_kind(ar_, RecordKind::kStart);
  put<std::uint64_t>(ar_, id);
  put<std::uint32_t>(ar_, start.number);
  put<std::int32_t>(ar_, start.worker_pid);
  put<std::int64_t>(ar_, start.started_ms);
  put<std::int64_t>(ar_, at_ms);
}

void BodyWriter::requeue(std::uint64_t id, std::int64_t at_ms) {
  put_kind(ar_, RecordKind::kRequeue);
  put<std::uint64_t>(ar_, id);
  put<std::int64_t>(ar_, at_ms);
}

void BodyWriter::attempt(std::uint64_t id, const Attempt& ended, TaskState next,
                         std::int64_t retry_due_ms, std::int64_t at_ms) {
  put_kind(ar_, RecordKind::kAttempt);
  put<std::uint64_t>(ar_, id);
  put_attempt(ar_, ended);
  put_enum(ar_, next);
  put<std::int64_t>(ar_, retry_due_ms);
  put<std::int64_t>(ar_, at_ms);
}

Status decode(std::string_view body, const std::function<void(Record&)>& on_record) {
  BoundedInputArchive ar;
  ar.rebind(body);
  std::size_t index = 0;
  try {
    const auto format = get<std::uint8_t>(ar, "format");
    if (format != kFormat) {
      return Status::error(Code::kInternal, "journal round: unknown format " +
                                                std::to_string(format) + " (this sandpool reads " +
                                                std::to_string(kFormat) + ")");
    }
    Record r;
    while (ar.remaining() > 0) {
      r = Record{};
      const std::size_t before = ar.remaining();
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
          throw DecodeError("kind",
                            "unknown record kind " + std::to_string(static_cast<int>(r.kind)));
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
