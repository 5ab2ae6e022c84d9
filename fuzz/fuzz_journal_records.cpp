// libFuzzer target: arbitrary bytes as one body of the task journal's round log
// (store/src/retry/journal_records.hpp), as poold reads every row of its state directory's
// journal at start. Properties: no crash, no sanitizer error, no read past the body, a failure
// is kInternal; and every record a body decodes to survives encode (format 2) -> decode
// unchanged, so that compaction's copies never alter a task.
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus into the directory it is given (format 2 bodies;
// tests/fuzz/journal_records/format1 is a body format 1's writer wrote, committed as is).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "retry/journal_records.hpp"

namespace sandpool::journal_log {
namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

bool same_attempt(const Attempt& a, const Attempt& b) {
  return a.number == b.number && a.outcome == b.outcome && a.error == b.error &&
         a.worker_pid == b.worker_pid && a.started_ms == b.started_ms && a.ended_ms == b.ended_ms &&
         a.backtrace == b.backtrace;
}

bool same_task(const JournalTask& a, const JournalTask& b) {
  if (a.running.has_value() != b.running.has_value()) return false;
  if (a.running && !same_attempt(*a.running, *b.running)) return false;
  if (a.task.history.size() != b.task.history.size()) return false;
  for (std::size_t i = 0; i < a.task.history.size(); ++i) {
    if (!same_attempt(a.task.history[i], b.task.history[i])) return false;
  }
  return a.task.id == b.task.id && a.pool == b.pool && a.task.type == b.task.type &&
         a.payload == b.payload && a.options == b.options && a.submitted_ms == b.submitted_ms &&
         a.task.state == b.task.state && a.task.reason == b.task.reason &&
         a.task.cancel_reason == b.task.cancel_reason && a.task.result == b.task.result &&
         a.task.error == b.task.error && a.retry_due_ms == b.retry_due_ms &&
         a.finished_ms == b.finished_ms && a.letter_id == b.letter_id;
}

bool same_record(const Record& a, const Record& b) {
  if (a.kind != b.kind || a.id != b.id) return false;
  switch (a.kind) {
    case RecordKind::kTask:
      return same_task(a.task, b.task);
    case RecordKind::kStart:
      return a.attempt.number == b.attempt.number && a.attempt.worker_pid == b.attempt.worker_pid &&
             a.attempt.started_ms == b.attempt.started_ms && a.at_ms == b.at_ms;
    case RecordKind::kRequeue:
      return a.at_ms == b.at_ms;
    case RecordKind::kAttempt:
      return same_attempt(a.attempt, b.attempt) && a.next == b.next &&
             a.retry_due_ms == b.retry_due_ms && a.at_ms == b.at_ms;
  }
  return false;
}

void run(std::string_view body) {
  std::vector<Record> got;
  std::size_t bytes = 0;
  const Status s = decode(body, [&](Record& r) {
    bytes += r.bytes;
    got.push_back(r);
  });
  require(s.is_ok() || s.code() == Code::kInternal);
  require(bytes <= body.size());
  // Whatever decoded, written again in format 2, reads back the same.
  std::string again;
  BodyWriter w;
  w.reset(&again);
  for (const Record& r : got) {
    switch (r.kind) {
      case RecordKind::kTask:
        w.task(r.task);
        break;
      case RecordKind::kStart:
        w.start(r.id, r.attempt, r.at_ms);
        break;
      case RecordKind::kRequeue:
        w.requeue(r.id, r.at_ms);
        break;
      case RecordKind::kAttempt:
        w.attempt(r.id, r.attempt, r.next, r.retry_due_ms, r.at_ms);
        break;
    }
  }
  std::vector<Record> back;
  require(decode(again, [&](Record& r) { back.push_back(r); }).is_ok());
  require(back.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i) require(same_record(got[i], back[i]));
}

}  // namespace
}  // namespace sandpool::journal_log

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::journal_log::run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include "seed_corpus.hpp"

#include <utility>

namespace sandpool::journal_log {
namespace {

Attempt seed_attempt(std::uint32_t number, Outcome outcome) {
  Attempt a;
  a.number = number;
  a.outcome = outcome;
  a.error = outcome == Outcome::kOk ? "" : "boom";
  a.worker_pid = 4000 + static_cast<std::int32_t>(number);
  a.started_ms = 1790000000100 + number;
  a.ended_ms = 1790000000200 + number;
  a.backtrace = outcome == Outcome::kTimedOut ? "#0 spin ()" : "";
  return a;
}

JournalTask seed_task(std::uint64_t id, bool every_option) {
  JournalTask t;
  t.task.id = id;
  t.task.type = "echo";
  t.pool = "echo";
  t.payload = std::string(64, 'x');
  t.submitted_ms = 1790000000000;
  if (every_option) {
    t.options.timeout = std::chrono::milliseconds(1500);
    t.options.retries = 3;
    t.options.priority = -2;
    t.options.key = "user-1";
    t.options.queue_ttl = std::chrono::milliseconds(60000);
    t.options.fail_fast = true;
    t.options.idempotency_key = "key-" + std::to_string(id);
    (void)t.options.set_not_before_ms(1790000060000);
    t.options.tenant = "acme";
  }
  return t;
}

int write_seeds(const std::string& dir) {
  std::string accepts, lifecycle, ended;
  BodyWriter w;
  w.reset(&accepts);
  for (std::uint64_t id = 1; id <= 4; ++id) w.task(seed_task(id, id % 2 == 0));

  w.reset(&lifecycle);
  JournalTask t = seed_task(9, true);
  w.task(t);
  Attempt start;
  start.number = 1;
  start.worker_pid = 4001;
  start.started_ms = 1790000000101;
  w.start(9, start, 1790000000101);
  w.attempt(9, seed_attempt(1, Outcome::kFailed), TaskState::kRetryWait, 1790000000900,
            1790000000201);
  w.start(9, start, 1790000000950);
  w.requeue(9, 1790000000960);

  w.reset(&ended);
  t.payload.clear();
  t.task.state = TaskState::kDeadLettered;
  t.task.reason = DeadReason::kRetriesExhausted;
  t.task.error = "gave up";
  t.task.history = {seed_attempt(1, Outcome::kFailed), seed_attempt(2, Outcome::kTimedOut)};
  t.finished_ms = 1790000001000;
  t.letter_id = 12;
  w.task(t);
  JournalTask done = seed_task(10, false);
  done.payload.clear();
  done.task.state = TaskState::kCompleted;
  done.task.result = "ok";
  done.task.history = {seed_attempt(1, Outcome::kOk)};
  done.finished_ms = 1790000000300;
  w.task(done);

  const std::pair<const char*, std::string> seeds[] = {
      {"accepts", accepts},
      {"lifecycle", lifecycle},
      {"ended", ended},
  };
  bool ok = true;
  for (const auto& [name, bytes] : seeds) {
    run(bytes);  // the seeds themselves must keep every property
    ok = ok && fuzz::write_seed(dir + "/" + name, bytes);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sandpool::journal_log

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_journal_records",
                                   sandpool::journal_log::write_seeds);
}

#endif
