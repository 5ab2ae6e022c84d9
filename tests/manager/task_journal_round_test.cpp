// One writer round that holds several writes of a task (docs/journal.md, "One row per task
// and round"): the writes left out because a later one supersedes them must leave the journal
// exactly as writing each would have.
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include <sandpool/store/task_journal.hpp>

#include "task_journal_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using namespace std::chrono_literals;

namespace {

Attempt started(std::uint32_t number) { return {number, Outcome::kOk, "", 4000, 100, 0}; }

Attempt ended(std::uint32_t number, Outcome outcome, std::string error) {
  return {number, outcome, std::move(error), 4000, 100 * number, 100 * number + 50, ""};
}

TaskResult completed(std::uint64_t id, std::vector<Attempt> history) {
  TaskResult r = account(id, TaskState::kCompleted);
  r.result = std::string("res\0ult ", 8) + std::to_string(id);
  r.history = std::move(history);
  return r;
}

void check_completed(TaskJournal& j, std::uint64_t id, std::size_t attempts) {
  INFO("task " << id);
  auto t = j.find(id);
  REQUIRE(t.is_ok());
  CHECK(t->task.state == TaskState::kCompleted);
  CHECK(t->task.result == std::string("res\0ult ", 8) + std::to_string(id));
  CHECK(t->payload.empty());
  CHECK(t->finished_ms != 0);
  CHECK(t->pool == "images");
  CHECK(t->options.idempotency_key == "key-" + std::to_string(id));
  REQUIRE(t->task.history.size() == attempts);
  CHECK(t->task.history.back().outcome == Outcome::kOk);
  CHECK(t->task.history.back().ended_ms == static_cast<std::int64_t>(100 * attempts + 50));
}

}  // namespace

TEST_CASE("writes that a later write of the same task supersedes within a round change nothing",
          "[journal]") {
  TempDir dir;
  DeadLetterStoreOptions o = journal_options_in(dir.state_dir());
  o.journal->group_commit = 1s;   // long enough for every write below to join one round
  o.journal->group_siblings = 0;  // and waited for even after a round of one batch
  {
    auto store = open_store(o);
    TaskJournal& j = journal_of(*store);
    accept_all(j, tasks(10, 1));  // accepted in an earlier round
    const std::uint64_t commits_before = j.stats().commits;

    Commits accepted, finished;
    j.accept(tasks(1, 6), accepted.callback());
    j.record_start(1, started(1));  // accepted, started and completed in the round
    j.finish(completed(1, {ended(1, Outcome::kOk, "")}), finished.callback());
    j.record_start(2, started(1));  // still running
    j.record_start(3, started(1));  // stopped before it became an attempt
    j.record_requeue(3);
    j.record_start(4, started(1));  // failed, waits to retry
    j.record_attempt(4, ended(1, Outcome::kError, "again"), TaskState::kRetryWait, 1700000009999);
    j.record_start(5, started(1));  // failed, queued again and started again
    j.record_attempt(5, ended(1, Outcome::kLost, "worker died"), TaskState::kQueued);
    j.record_start(5, started(2));
    j.record_start(6, started(1));  // failed, then completed: both in the round
    j.record_attempt(6, ended(1, Outcome::kTimedOut, "slow"), TaskState::kQueued);
    j.record_start(6, started(2));
    j.finish(completed(6, {ended(1, Outcome::kTimedOut, "slow"), ended(2, Outcome::kOk, "")}),
             finished.callback());
    j.record_start(10, started(1));  // accepted before the round, completed in it
    j.finish(completed(10, {ended(1, Outcome::kOk, "")}), finished.callback());
    REQUIRE(j.flush(60s).is_ok());

    // The test is about one round: it says nothing if the writes were split.
    REQUIRE(j.stats().commits == commits_before + 1);
    REQUIRE(accepted.size() == 1);
    CHECK(accepted.all().front().is_ok());
    REQUIRE(finished.size() == 3);
    for (const Status& s : finished.all()) CHECK(s.is_ok());
    CHECK(j.stats().finished_kept == 3);
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  check_completed(j, 1, 1);
  check_completed(j, 6, 2);
  check_completed(j, 10, 1);
  CHECK(j.stats().finished_kept == 3);
  CHECK(*j.highest_task_id() == 10);

  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 4);
  const JournalTask& running = (*open)[0];
  CHECK(running.task.id == 2);
  CHECK(running.task.state == TaskState::kRunning);
  REQUIRE(running.running);
  CHECK(running.running->number == 1);
  CHECK(running.payload == task(2).payload);

  const JournalTask& requeued = (*open)[1];
  CHECK(requeued.task.id == 3);
  CHECK(requeued.task.state == TaskState::kQueued);
  CHECK_FALSE(requeued.running);
  CHECK(requeued.task.history.empty());

  const JournalTask& waiting = (*open)[2];
  CHECK(waiting.task.id == 4);
  CHECK(waiting.task.state == TaskState::kRetryWait);
  CHECK(waiting.retry_due_ms == 1700000009999);
  CHECK_FALSE(waiting.running);
  REQUIRE(waiting.task.history.size() == 1);
  CHECK(waiting.task.history[0].error == "again");

  const JournalTask& again = (*open)[3];
  CHECK(again.task.id == 5);
  CHECK(again.task.state == TaskState::kRunning);
  REQUIRE(again.running);
  CHECK(again.running->number == 2);
  REQUIRE(again.task.history.size() == 1);
  CHECK(again.task.history[0].outcome == Outcome::kLost);
}

TEST_CASE("the WAL is checkpointed by a thread of its own, not by the writer", "[journal]") {
  TempDir dir;
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  // About 24 MB of payloads: past the 1000 pages (16 MB at a new store's 16 KiB pages) at which
  // a checkpoint is due.
  std::uint64_t next = 1;
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<JournalTask> b = tasks(next, 100);
    for (JournalTask& t : b) t.payload.assign(40000, 'p');
    next += 100;
    accept_all(j, std::move(b));
  }
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (j.stats().wal_checkpoints == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);  // the checkpoint has no event a test could wait on
  }
  CHECK(j.stats().wal_checkpoints >= 1);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  CHECK(open->size() == 600);
}

namespace {

std::string page_size_of(const std::string& db_path) {
  auto db = raw_connection(db_path);
  return pragma_text(db, "PRAGMA page_size");
}

}  // namespace

TEST_CASE("a new store's database has 16 KiB pages, and an existing one keeps its own",
          "[journal]") {
  TempDir fresh;
  {
    auto store = open_store(journal_options_in(fresh.state_dir()));
    CHECK(page_size_of(store->path()) == "16384");
  }
  // A file an older poold made, with SQLite's default pages and something in it.
  TempDir old;
  const std::string path = old.state_dir() + "/dead_letters.db";
  std::filesystem::create_directories(old.state_dir());
  {
    auto db = raw_connection(path);
    REQUIRE(sqlite3_exec(db.handle(), "PRAGMA page_size = 4096; CREATE TABLE t (x)", nullptr,
                         nullptr, nullptr) == SQLITE_OK);
  }
  auto store = open_store(journal_options_in(old.state_dir()));
  CHECK(page_size_of(path) == "4096");
  accept_all(journal_of(*store), tasks(1, 10));
}

TEST_CASE("a lone accept commits at once, and accepts wait for a group once rounds carry several",
          "[journal]") {
  TempDir dir;
  DeadLetterStoreOptions o = journal_options_in(dir.state_dir());
  o.journal->group_commit = 120s;  // a wait for the group would outlast every flush below
  o.busy_timeout = 60s;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);

  // Quiet so far: one batch does not wait for company.
  Commits first;
  j.accept(tasks(1, 3), first.callback());
  REQUIRE(j.flush(30s).is_ok());
  REQUIRE(first.size() == 1);

  // Two batches share a round (the writer may wake between the two accept() calls and take
  // the first alone: then it tries again)...
  auto locker = raw_connection(store->path());
  std::uint64_t id = 10;
  for (int tries = 0;; ++tries) {
    REQUIRE(tries < 50);
    const std::uint64_t commits = j.stats().commits;
    REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
    Commits pair;
    j.accept(tasks(id, 3), pair.callback());
    j.accept(tasks(id + 3, 3), pair.callback());
    id += 6;
    REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
    REQUIRE(j.flush(30s).is_ok());
    REQUIRE(pair.size() == 2);
    if (j.stats().commits == commits + 1) break;
  }

  // ... and from then on a batch waits up to group_commit for others.
  Commits waits;
  j.accept(tasks(30, 3), waits.callback());
  CHECK(j.flush(std::chrono::milliseconds(500)).code() == Code::kTimeout);
  CHECK(waits.size() == 0);
  REQUIRE(store->close().is_ok());  // closing commits what waits
  CHECK(waits.size() == 1);
}

TEST_CASE("a task accepted and dead-lettered in one transaction reads back dead-lettered",
          "[journal]") {
  TempDir dir;
  DeadLetterStoreOptions o = journal_options_in(dir.state_dir());
  o.journal->group_commit = 1s;   // the letter joins the accept's round
  o.journal->group_siblings = 0;  // and the writer waits for it even after a quiet spell
  std::uint64_t letter_id = 0;
  {
    auto store = open_store(o);
    TaskJournal& j = journal_of(*store);
    const std::uint64_t commits_before = j.stats().commits;
    Commits accepted;
    j.accept(tasks(7, 1), accepted.callback());
    DeadLetter l = letter(7);
    l.task.history = {ended(1, Outcome::kFailed, "no")};
    Receipts receipts;
    REQUIRE(j.dead_letter(l, receipts.for_task(7)).is_ok());
    REQUIRE(j.flush(60s).is_ok());
    REQUIRE(store->flush(60s).is_ok());
    // The test is about one transaction: it says nothing if the two were split.
    REQUIRE(j.stats().commits == commits_before + 1);
    REQUIRE(accepted.size() == 1);
    CHECK(accepted.all().front().is_ok());
    REQUIRE(receipts.size() == 1);
    letter_id = receipts.all().front().second.letter_id;
    REQUIRE(letter_id > 0);
    auto seven = j.find(7);
    REQUIRE(seven.is_ok());
    CHECK(seven->task.state == TaskState::kDeadLettered);
    CHECK(seven->letter_id == letter_id);
    CHECK(j.unfinished()->empty());
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  CHECK(j.unfinished()->empty());  // a replay does not bring it back to run again
  auto seven = j.find(7);
  REQUIRE(seven.is_ok());
  CHECK(seven->task.state == TaskState::kDeadLettered);
  CHECK(seven->task.reason == DeadReason::kRetriesExhausted);
  CHECK(seven->letter_id == letter_id);
  REQUIRE(seven->task.history.size() == 1);
  CHECK(seven->task.history[0].error == "no");
}
