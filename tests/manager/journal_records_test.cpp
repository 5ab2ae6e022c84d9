// The round log's record codec (store/src/retry/journal_records.cpp): format 2 round-trips every
// field, stays small for a typical task, still reads format 1 bodies, and refuses a damaged
// body without reading past it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "retry/journal_records.hpp"
#include "task_journal_support.hpp"

using namespace sandpool;
using sandpool::journal_log::BodyWriter;
using sandpool::journal_log::Record;
using sandpool::journal_log::RecordKind;

namespace records_test {

std::vector<Record> decoded(const std::string& body, Status* status = nullptr) {
  std::vector<Record> out;
  const Status s = journal_log::decode(body, [&](Record& r) { out.push_back(r); });
  if (status != nullptr) {
    *status = s;
  } else {
    REQUIRE(s.is_ok());
  }
  return out;
}

Attempt ended_attempt(std::uint32_t number) {
  Attempt a;
  a.number = number;
  a.outcome = Outcome::kFailed;
  a.error = "boom " + std::to_string(number);
  a.worker_pid = 4000 + static_cast<std::int32_t>(number);
  a.started_ms = 1700000000100 + number;
  a.ended_ms = 1700000000200 + number;
  a.backtrace = "#0 frame";
  return a;
}

// Every field set to something other than its default.
JournalTask full_task(std::uint64_t id) {
  JournalTask t;
  t.task.id = id;
  t.task.type = "resize";
  t.pool = "images";
  t.payload = std::string("pay\0load", 8);
  t.options.timeout = std::chrono::milliseconds(1500);
  t.options.retries = 0;  // set, and zero: not the same as unset
  t.options.priority = -7;
  t.options.key = "user-1";
  t.options.queue_ttl = std::chrono::milliseconds(60000);
  t.options.fail_fast = true;
  t.options.idempotency_key = "key-" + std::to_string(id);
  REQUIRE(t.options.set_not_before_ms(1700000090000));
  t.options.tenant = "acme";
  t.submitted_ms = 1700000000007;
  t.task.state = TaskState::kDeadLettered;
  t.task.reason = DeadReason::kRetriesExhausted;
  t.task.cancel_reason = CancelReason::kUser;
  t.task.result = std::string("re\0sult", 7);
  t.task.error = "gave up";
  t.running = ended_attempt(3);
  t.running->ended_ms = 0;
  t.retry_due_ms = 1699999999000;  // before the body's base: a negative delta
  t.finished_ms = 1700000000400;
  t.letter_id = 0xfedcba9876543210ull;
  t.task.history = {ended_attempt(1), ended_attempt(2)};
  return t;
}

void check_same_whole_task(const JournalTask& got, const JournalTask& want) {
  testing::check_same_task(got, want);
  CHECK(got.task.state == want.task.state);
  CHECK(got.task.reason == want.task.reason);
  CHECK(got.task.cancel_reason == want.task.cancel_reason);
  CHECK(got.task.result == want.task.result);
  CHECK(got.task.error == want.task.error);
  REQUIRE(got.running.has_value() == want.running.has_value());
  if (want.running) testing::check_same_attempt(*got.running, *want.running);
  CHECK(got.retry_due_ms == want.retry_due_ms);
  CHECK(got.finished_ms == want.finished_ms);
  CHECK(got.letter_id == want.letter_id);
  REQUIRE(got.task.history.size() == want.task.history.size());
  for (std::size_t i = 0; i < want.task.history.size(); ++i) {
    testing::check_same_attempt(got.task.history[i], want.task.history[i]);
  }
}

// A body of each kind of record, every field of them set.
std::string every_record(std::vector<JournalTask>* tasks) {
  std::string body;
  BodyWriter w;
  w.reset(&body);
  tasks->push_back(full_task(7));
  tasks->push_back(JournalTask{});  // every field at its default
  tasks->back().task.id = 1;
  tasks->push_back(full_task(8));  // its pool and type from the body's table
  for (const JournalTask& t : *tasks) w.task(t);
  Attempt start;
  start.number = 2;
  start.worker_pid = 4242;
  start.started_ms = 1700000000100;
  w.start(7, start, 1700000000101);
  w.attempt(7, ended_attempt(2), TaskState::kRetryWait, 1700000000900, 1700000000201);
  w.attempt(7, ended_attempt(3), TaskState::kQueued, 0, 1700000000202);
  w.requeue(7, 1700000000300);
  return body;
}

// Written by format 1's writer (before 2026-11-27): a task with every option set, a start,
// an attempt end into a retry wait, a requeue, and a dead-lettered task with one attempt.
constexpr const char* kFormat1Body =
    "0101070000000000000006000000696d6167657306000000726573697a6508000000706179006c6f616401dc"
    "050000000000000103000000feffffff06000000757365722d310160ea00000000000001050000006b65792d"
    "370768e5cf8b0100000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000002070000000000000001000000921000006468e5cf8b0100006568e5cf8b010000040700000000"
    "000000010000000204000000626f6f6d921000006468e5cf8b010000c868e5cf8b0100000400000023302066"
    "03846be5cf8b010000c968e5cf8b0100000307000000000000002c69e5cf8b01000001080000000000000006"
    "000000696d6167657306000000726573697a6500000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000868e5cf8b010000050200000000000700000067617665207570000000"
    "0000000000009069e5cf8b010000630000000000000001000000010000000204000000626f6f6d9210000064"
    "68e5cf8b010000c868e5cf8b0100000400000023302066";

}  // namespace records_test

using namespace records_test;

TEST_CASE("journal records: format 2 reads back every field of every record kind",
          "[journal][records]") {
  std::vector<JournalTask> tasks;
  const std::string body = every_record(&tasks);
  REQUIRE(static_cast<std::uint8_t>(body[0]) == journal_log::kFormat);
  const std::vector<Record> got = decoded(body);
  REQUIRE(got.size() == 7);
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(got[i].kind == RecordKind::kTask);
    CHECK(got[i].id == tasks[i].task.id);
    check_same_whole_task(got[i].task, tasks[i]);
  }
  CHECK_FALSE(got[1].task.options.retries.has_value());
  CHECK_FALSE(got[1].task.running.has_value());

  REQUIRE(got[3].kind == RecordKind::kStart);
  CHECK(got[3].id == 7);
  CHECK(got[3].attempt.number == 2);
  CHECK(got[3].attempt.worker_pid == 4242);
  CHECK(got[3].attempt.started_ms == 1700000000100);
  CHECK(got[3].at_ms == 1700000000101);

  REQUIRE(got[4].kind == RecordKind::kAttempt);
  testing::check_same_attempt(got[4].attempt, ended_attempt(2));
  CHECK(got[4].next == TaskState::kRetryWait);
  CHECK(got[4].retry_due_ms == 1700000000900);
  CHECK(got[4].at_ms == 1700000000201);
  REQUIRE(got[5].kind == RecordKind::kAttempt);
  CHECK(got[5].next == TaskState::kQueued);
  CHECK(got[5].retry_due_ms == 0);

  REQUIRE(got[6].kind == RecordKind::kRequeue);
  CHECK(got[6].id == 7);
  CHECK(got[6].at_ms == 1700000000300);

  // The sizes decode reports add up to the body, header aside.
  std::size_t sum = 0;
  for (const Record& r : got) sum += r.bytes;
  CHECK(sum + journal_log::kHeaderBytes == body.size());
  // The second task of the same pool and type names them by reference.
  CHECK(got[2].bytes < got[0].bytes);
}

TEST_CASE("journal records: a typical task's accept and end stay small", "[journal][records]") {
  // An echo task of a 64-byte payload, submitted with no option, and its end with a 64-byte
  // result after one attempt: format 1 took 177 and 210 bytes.
  std::string body;
  BodyWriter w;
  w.reset(&body);
  std::size_t accept = 0, end = 0;
  for (std::uint64_t id = 250000; id < 250010; ++id) {
    JournalTask t;
    t.task.id = id;
    t.task.type = "echo";
    t.pool = "echo";
    t.payload = std::string(64, 'x');
    t.submitted_ms = 1790000000000 + static_cast<std::int64_t>(id % 7);
    std::size_t before = body.size();
    w.task(t);
    accept = body.size() - before;
    t.payload.clear();
    t.task.state = TaskState::kCompleted;
    t.task.result = std::string(64, 'y');
    Attempt a;
    a.number = 1;
    a.worker_pid = 123456;
    a.started_ms = t.submitted_ms + 2;
    a.ended_ms = t.submitted_ms + 3;
    t.task.history = {a};
    t.finished_ms = t.submitted_ms + 3;
    before = body.size();
    w.task(t);
    end = body.size() - before;
  }
  CHECK(accept <= 75);
  CHECK(end <= 90);
  REQUIRE(decoded(body).size() == 20);
}

TEST_CASE("journal records: a format 1 body is still read", "[journal][records]") {
  std::string body;
  for (std::size_t i = 0; kFormat1Body[i] != '\0'; i += 2) {
    body.push_back(static_cast<char>(std::stoi(std::string(kFormat1Body + i, 2), nullptr, 16)));
  }
  const std::vector<Record> got = decoded(body);
  REQUIRE(got.size() == 5);
  REQUIRE(got[0].kind == RecordKind::kTask);
  const JournalTask& t = got[0].task;
  CHECK(t.task.id == 7);
  CHECK(t.pool == "images");
  CHECK(t.task.type == "resize");
  CHECK(t.payload == std::string("pay\0load", 8));
  CHECK(t.options.timeout == std::chrono::milliseconds(1500));
  CHECK(t.options.retries == 3u);
  CHECK(t.options.priority == -2);
  CHECK(t.options.key == "user-1");
  CHECK(t.options.queue_ttl == std::chrono::milliseconds(60000));
  CHECK(t.options.fail_fast);
  CHECK(t.options.idempotency_key == "key-7");
  CHECK(t.submitted_ms == 1700000000007);
  REQUIRE(got[1].kind == RecordKind::kStart);
  CHECK(got[1].attempt.worker_pid == 4242);
  CHECK(got[1].at_ms == 1700000000101);
  REQUIRE(got[2].kind == RecordKind::kAttempt);
  CHECK(got[2].attempt.error == "boom");
  CHECK(got[2].attempt.backtrace == "#0 f");
  CHECK(got[2].next == TaskState::kRetryWait);
  CHECK(got[2].retry_due_ms == 1700000000900);
  REQUIRE(got[3].kind == RecordKind::kRequeue);
  CHECK(got[3].at_ms == 1700000000300);
  REQUIRE(got[4].kind == RecordKind::kTask);
  CHECK(got[4].task.task.state == TaskState::kDeadLettered);
  CHECK(got[4].task.task.reason == DeadReason::kRetriesExhausted);
  CHECK(got[4].task.letter_id == 99);
  REQUIRE(got[4].task.task.history.size() == 1);
  CHECK(got[4].task.task.history[0].outcome == Outcome::kFailed);
}

TEST_CASE("journal records: a damaged body is refused, naming the record", "[journal][records]") {
  std::vector<JournalTask> tasks;
  const std::string body = every_record(&tasks);

  SECTION("every truncation") {
    // Cutting inside a record fails; cutting between records delivers those before it.
    for (std::size_t n = 1; n < body.size(); ++n) {
      Status s;
      decoded(body.substr(0, n), &s);
      (void)s;  // no crash, no read past the end (ASan); ok or kInternal
      if (!s) CHECK(s.code() == Code::kInternal);
    }
    Status s;
    decoded(body.substr(0, body.size() - 1), &s);
    CHECK_FALSE(s.is_ok());
  }
  SECTION("an unknown format") {
    std::string bad = body;
    bad[0] = 9;
    Status s;
    decoded(bad, &s);
    CHECK(s.message().find("unknown format 9") != std::string::npos);
  }
  SECTION("an unknown record kind") {
    std::string bad = body + std::string(1, '\x7f');
    Status s;
    const std::vector<Record> got = decoded(bad, &s);
    CHECK(got.size() == 7);
    CHECK(s.message().find("record 7") != std::string::npos);
  }
  SECTION("unknown field flags") {
    std::string bad = body.substr(0, journal_log::kHeaderBytes);
    bad += "\x01\x05\xff\xff\xff\x7f";  // a task record, id 5, every flag bit
    Status s;
    decoded(bad, &s);
    CHECK(s.message().find("unknown fields") != std::string::npos);
  }
  SECTION("a string reference beyond the table") {
    std::string bad = body.substr(0, journal_log::kHeaderBytes);
    bad += std::string("\x01\x05\x00\x03", 4);  // task 5, no fields, pool: reference 3
    Status s;
    decoded(bad, &s);
    CHECK(s.message().find("unknown string reference") != std::string::npos);
  }
  SECTION("a varint longer than 64 bits") {
    std::string bad = body.substr(0, journal_log::kHeaderBytes);
    bad += "\x03" + std::string(10, '\xff') + "\x01";  // a requeue of an impossible id
    Status s;
    decoded(bad, &s);
    CHECK(s.message().find("longer than 64 bits") != std::string::npos);
  }
  SECTION("a string longer than the body") {
    std::string bad = body.substr(0, journal_log::kHeaderBytes);
    bad += std::string("\x01\x05\x00\x00\x7f", 5);  // pool: a new string of 127 bytes
    Status s;
    decoded(bad, &s);
    CHECK_FALSE(s.is_ok());
  }
}
