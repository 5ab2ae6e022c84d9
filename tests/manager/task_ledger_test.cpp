// TaskLedger (task_ledger.hpp): the books on a pool's tasks from taken in to terminal, alone:
// open counts, letters and ends awaiting their write, finished records, recent dead letters.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/task_ledger.hpp"

using sandpool::DeadReason;
using sandpool::SubmitOptions;
using sandpool::TaskState;
using sandpool::core::FinishedTaskBounds;
using sandpool::core::TaskLedger;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;

namespace {

constexpr std::int64_t kLedgerSec = 1000000000;

TaskPtr ledger_task(std::uint64_t id, std::int64_t expires_ns = 0) {
  SubmitOptions o;
  if (expires_ns != 0) o.queue_ttl = std::chrono::milliseconds(1);
  auto t = TaskRecord::make(id, "echo", "p", o);
  t->queued_ns = expires_ns - 1000000;  // its expires_ns() is queued_ns + queue_ttl
  return t;
}

// A ledger keeping 10 finished records and 2 dead letters.
TaskLedger small_ledger() { return TaskLedger(FinishedTaskBounds{10, 0, 0}, 2); }

std::vector<std::uint64_t> ledger_ids(const TaskLedger& l, std::size_t limit = 100) {
  std::vector<std::uint64_t> ids;
  l.for_each([&](const TaskPtr& t) { ids.push_back(t->id); }, [&] { return ids.size() < limit; });
  return ids;
}

}  // namespace

TEST_CASE("a task taken in is open until made terminal, and a TTL task counts apart") {
  TaskLedger l = small_ledger();
  TaskPtr a = ledger_task(1);
  TaskPtr b = ledger_task(2, 5 * kLedgerSec);
  l.open(*a);
  l.open(*b);
  CHECK(l.open_tasks() == 2);
  CHECK(l.ttl_tasks() == 1);
  l.record_terminal(b, TaskState::kCompleted, kLedgerSec);
  CHECK(l.open_tasks() == 1);
  CHECK(l.ttl_tasks() == 0);
  CHECK(l.find(2) == b);  // kept among the finished
  l.record_terminal(a, TaskState::kCancelled, 2 * kLedgerSec);
  CHECK(l.open_tasks() == 0);
  CHECK(l.dead_letters().empty());  // neither was a dead letter
}

TEST_CASE("a letter being written keeps its task open and findable until it is taken back") {
  TaskLedger l = small_ledger();
  TaskPtr t = ledger_task(7);
  l.open(*t);
  l.await_letter(t, DeadReason::kRetriesExhausted);
  CHECK(l.letters_pending() == 1);
  CHECK(l.only_writes_open());
  CHECK(l.find(7) == t);
  CHECK_FALSE(l.take_letter(8).has_value());  // not awaited
  auto letter = l.take_letter(7);
  REQUIRE(letter.has_value());
  CHECK(letter->first == t);
  CHECK(letter->second == DeadReason::kRetriesExhausted);
  CHECK(l.letters_pending() == 0);
  CHECK_FALSE(l.take_letter(7).has_value());  // once only
  CHECK(l.open_tasks() == 1);                 // terminal only once recorded so
  l.record_terminal(t, TaskState::kDeadLettered, kLedgerSec);
  REQUIRE(l.dead_letters().size() == 1);
}

TEST_CASE("ends being written are taken back in any order, and the last one dropped at once") {
  TaskLedger l = small_ledger();
  std::vector<TaskPtr> tasks;
  for (std::uint64_t id = 1; id <= 3; ++id) {
    tasks.push_back(ledger_task(id));
    l.open(*tasks.back());
    l.await_end(tasks.back());
  }
  CHECK(l.ends_pending() == 3);
  CHECK(l.only_writes_open());
  CHECK(l.take_end(2) == tasks[1]);  // out of order
  CHECK(l.take_end(2) == nullptr);
  CHECK(l.find(3) == tasks[2]);
  l.drop_last_end();  // 3's end was answered at once
  CHECK(l.ends_pending() == 1);
  CHECK(l.take_end(1) == tasks[0]);
  CHECK(l.ends_pending() == 0);
  CHECK_FALSE(l.only_writes_open());  // three open, none awaiting a write
}

TEST_CASE("the recent dead letters keep the newest accounts up to their capacity") {
  TaskLedger l = small_ledger();
  for (std::uint64_t id = 1; id <= 3; ++id) {
    TaskPtr t = ledger_task(id);
    t->account().error = "e" + std::to_string(id);
    l.open(*t);
    l.record_terminal(t, TaskState::kDeadLettered, static_cast<std::int64_t>(id) * kLedgerSec);
  }
  REQUIRE(l.dead_letters().size() == 2);
  CHECK(l.dead_letters().front().error == "e2");
  CHECK(l.dead_letters().back().error == "e3");
  // A reconfigure lowers the capacity: the oldest go.
  l.set_bounds(FinishedTaskBounds{10, 0, 0}, 1, 4 * kLedgerSec);
  REQUIRE(l.dead_letters().size() == 1);
  CHECK(l.dead_letters().front().error == "e3");
}

TEST_CASE("the ledger lists letters, then ends, then the finished newest first, up to a limit") {
  TaskLedger l = small_ledger();
  for (std::uint64_t id = 1; id <= 3; ++id) {  // finished: 1, 2, 3
    TaskPtr t = ledger_task(id);
    l.open(*t);
    l.record_terminal(t, TaskState::kCompleted, static_cast<std::int64_t>(id) * kLedgerSec);
  }
  TaskPtr end = ledger_task(20);
  l.open(*end);
  l.await_end(end);
  TaskPtr letter = ledger_task(10);
  l.open(*letter);
  l.await_letter(letter, DeadReason::kPermanent);
  CHECK(ledger_ids(l) == std::vector<std::uint64_t>{10, 20, 3, 2, 1});
  CHECK(ledger_ids(l, 3) == std::vector<std::uint64_t>{10, 20, 3});
}

TEST_CASE("finished records age out, by the ledger's bounds, and new bounds apply at once") {
  TaskLedger l(FinishedTaskBounds{10, 2 * kLedgerSec, 0}, 5);
  TaskPtr t = ledger_task(1);
  l.open(*t);
  l.record_terminal(t, TaskState::kCompleted, kLedgerSec);
  l.expire(2 * kLedgerSec);
  CHECK(l.find(1) == t);
  l.expire(4 * kLedgerSec);
  CHECK(l.find(1) == nullptr);
  TaskPtr u = ledger_task(2);
  l.open(*u);
  l.record_terminal(u, TaskState::kCompleted, 5 * kLedgerSec);
  l.set_bounds(FinishedTaskBounds{0, 0, 0}, 5, 5 * kLedgerSec);  // keep none
  CHECK(l.find(2) == nullptr);
}
