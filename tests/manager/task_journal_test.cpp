// The task journal on real SQLite files (docs/journal.md): what accept() commits and when its
// callback runs, group commit across threads, records and finishes read back at recovery,
// dead-lettering in one transaction with the letter, the migration from schema version 1,
// and retention in chunks.
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <thread>

#include <sandpool/store/task_journal.hpp>

#include "retry/dead_letter_rows.hpp"
#include "retry/dead_letter_schema.hpp"
#include "task_journal_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;

namespace {

Attempt attempt(std::uint32_t number, Outcome outcome, std::string error) {
  return {
      number,       outcome,           std::move(error), 4000 + static_cast<std::int32_t>(number),
      100 * number, 100 * number + 50, "#0 frame"};
}

}  // namespace

TEST_CASE("accepted tasks come back at recovery with every option, state, attempt and due time",
          "[journal]") {
  TempDir dir;
  {
    auto store = open_store(journal_options_in(dir.state_dir()));
    TaskJournal& j = journal_of(*store);
    accept_all(j, tasks(1, 4));
    j.record_start(2, {1, Outcome::kOk, "", 4001, 100, 0});
    j.record_start(3, {1, Outcome::kOk, "", 4001, 100, 0});
    j.record_attempt(3, attempt(1, Outcome::kTimedOut, "timed out"), TaskState::kRetryWait,
                     1700000009999);
    TaskResult done = account(4, TaskState::kCompleted);
    done.result = std::string("res\0ult", 7);
    done.history = {attempt(1, Outcome::kOk, "")};
    Commits finished;
    j.finish(done, finished.callback());
    REQUIRE(j.flush(60s).is_ok());
    REQUIRE(finished.size() == 1);
    CHECK(finished.all().front().is_ok());
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_same_task((*open)[i], task(i + 1));
  CHECK((*open)[0].task.state == TaskState::kQueued);
  CHECK((*open)[0].task.history.empty());
  CHECK_FALSE((*open)[0].running);
  CHECK((*open)[1].task.state == TaskState::kRunning);
  REQUIRE((*open)[1].running);
  CHECK((*open)[1].running->number == 1);
  CHECK((*open)[1].running->worker_pid == 4001);
  CHECK((*open)[1].running->started_ms == 100);
  CHECK((*open)[2].task.state == TaskState::kRetryWait);
  CHECK((*open)[2].retry_due_ms == 1700000009999);
  CHECK_FALSE((*open)[2].running);
  REQUIRE((*open)[2].task.history.size() == 1);
  CHECK((*open)[2].task.history[0].outcome == Outcome::kTimedOut);
  CHECK((*open)[2].task.history[0].error == "timed out");
  CHECK((*open)[2].task.history[0].backtrace == "#0 frame");

  auto four = j.find(4);
  REQUIRE(four.is_ok());
  CHECK(four->task.state == TaskState::kCompleted);
  CHECK(four->task.result == std::string("res\0ult", 7));
  CHECK(four->payload.empty());  // a finished task keeps its account, not its input
  CHECK(four->finished_ms > 0);
  REQUIRE(four->task.history.size() == 1);
  auto by_key = j.find_by_key("key-3");
  REQUIRE(by_key.is_ok());
  CHECK(by_key->task.id == 3);
  CHECK(j.find(99).status().code() == Code::kNotFound);
  auto highest = j.highest_task_id();
  REQUIRE(highest.is_ok());
  CHECK(*highest == 4);
}

TEST_CASE("a requeue puts a started task back to queued and leaves every other row alone",
          "[journal]") {
  TempDir dir;
  {
    auto store = open_store(journal_options_in(dir.state_dir()));
    TaskJournal& j = journal_of(*store);
    accept_all(j, tasks(1, 4));
    j.record_start(1, {1, Outcome::kOk, "", 4001, 100, 0});
    j.record_requeue(1);  // stopped before it became an attempt
    j.record_start(2, {1, Outcome::kOk, "", 4001, 100, 0});
    j.record_attempt(2, attempt(1, Outcome::kError, "again"), TaskState::kRetryWait, 1700000009999);
    j.record_requeue(2);  // waits to retry: its due time stands
    j.record_requeue(3);  // queued, never started
    Commits finished;
    j.finish(account(4, TaskState::kCompleted), finished.callback());
    j.record_requeue(4);   // ended: stays ended
    j.record_requeue(99);  // not journaled
    REQUIRE(j.flush(60s).is_ok());
    CHECK(j.stats().records_written == 9);
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 3);
  CHECK((*open)[0].task.state == TaskState::kQueued);
  CHECK_FALSE((*open)[0].running);
  CHECK((*open)[0].task.history.empty());
  CHECK((*open)[1].task.state == TaskState::kRetryWait);
  CHECK((*open)[1].retry_due_ms == 1700000009999);
  CHECK((*open)[1].task.history.size() == 1);
  CHECK((*open)[2].task.state == TaskState::kQueued);
  CHECK(j.find(4)->task.state == TaskState::kCompleted);
  CHECK(j.find(99).status().code() == Code::kNotFound);
}

TEST_CASE("an accept's callback runs only after its rows are committed", "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.busy_timeout = 60s;  // the writer waits for the lock instead of refusing the batch
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  std::atomic<int> calls{0};
  std::atomic<std::int64_t> rows_seen{-1};
  j.accept(tasks(1, 10), [&](const Status& s) {
    CHECK(s.is_ok());
    rows_seen =
        static_cast<std::int64_t>(committed_tasks(store->path()));  // another connection sees them
    ++calls;
  });
  REQUIRE(eventually([&] { return j.stats().pending == 1; }));
  CHECK(calls == 0);
  CHECK(committed_tasks(store->path()) == 0);
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  CHECK(calls == 1);
  CHECK(rows_seen == 10);
}

TEST_CASE("accepts from eight threads while the database is locked share two commits",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.busy_timeout = 60s;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  Commits commits;
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t b = 0; b < 10; ++b)
        j.accept(tasks(t * 1000 + b * 10, 5), commits.callback());
    });
  }
  for (auto& t : threads) t.join();
  // Every batch waits: the writer took what was there and waits for the lock.
  CHECK(j.stats().pending == 80);
  CHECK(commits.size() == 0);
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(commits.size() == 80);
  for (const Status& s : commits.all()) CHECK(s.is_ok());
  const auto st = j.stats();
  CHECK(st.tasks_accepted == 400);
  CHECK(st.commits <= 2);  // the first taken before the lock was seen, the rest in one
  CHECK(st.pending == 0);
  CHECK(committed_tasks(store->path()) == 400);
}

TEST_CASE("rounds of max_batch tasks take the queue's front in order, records with their tasks",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.busy_timeout = 60s;
  o.journal->max_batch = 3;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  // 300 one-task batches, each followed by its task's start, queue while the writer waits
  // for the lock: the rounds after it take three tasks' worth from the queue's front each.
  Commits commits;
  constexpr std::uint64_t kBatches = 300;
  for (std::uint64_t id = 1; id <= kBatches; ++id) {
    j.accept(tasks(id, 1), commits.callback());
    Attempt start;
    start.number = 1;
    start.worker_pid = static_cast<std::int32_t>(1000 + id);
    start.started_ms = 1700000000000 + static_cast<std::int64_t>(id);
    j.record_start(id, start);
  }
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(commits.size() == kBatches);
  for (const Status& s : commits.all()) CHECK(s.is_ok());
  const auto st = j.stats();
  CHECK(st.tasks_accepted == kBatches);
  CHECK(st.commits >= kBatches / 3);  // no round took more than max_batch tasks
  CHECK(st.pending == 0);
  // Every start came after its accept: a start taken before it would have been a no-op.
  auto log = committed_log(store->path());
  REQUIRE(log->ids().size() == kBatches);
  for (std::uint64_t id = 1; id <= kBatches; ++id) {
    const JournalTask* t = log->find(id);
    REQUIRE(t != nullptr);
    INFO("task " << id);
    REQUIRE(t->running.has_value());
    CHECK(t->running->worker_pid == static_cast<std::int32_t>(1000 + id));
  }
}

TEST_CASE("a batch with an id the journal holds is refused whole while the others commit",
          "[journal]") {
  TempDir dir;
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 1));
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
  Commits good1, bad, good2;
  j.accept(tasks(10, 3), good1.callback());
  j.accept({task(20), task(1)}, bad.callback());  // 1 is taken
  j.accept(tasks(30, 3), good2.callback());
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(bad.size() == 1);
  CHECK_FALSE(bad.all().front().is_ok());
  CHECK_THAT(bad.all().front().message(),
             Catch::StartsWith("storage: ") && Catch::Contains("journaled already"));
  CHECK(good1.all().front().is_ok());
  CHECK(good2.all().front().is_ok());
  const auto log = committed_log(store->path());
  CHECK(log->find(20) == nullptr);  // all or none
  CHECK(log->ids() == std::vector<std::uint64_t>{1, 10, 11, 12, 30, 31, 32});
  CHECK(j.stats().batches_refused == 1);
}

TEST_CASE("a batch that would take the journal past max_unfinished is refused whole", "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.journal->max_unfinished = 5;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 3));
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());  // one round for the three
  Commits fits, over, ended;
  j.accept(tasks(10, 2), fits.callback());  // 5 held: the bound
  j.accept(tasks(20, 1), over.callback());  // a sixth: refused
  j.finish(account(1, TaskState::kCompleted), ended.callback());
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  CHECK(fits.all().front().is_ok());
  REQUIRE(over.size() == 1);
  CHECK(over.all().front().code() == Code::kQueueFull);
  CHECK_THAT(over.all().front().message(),
             Catch::StartsWith("storage: ") && Catch::Contains("5 unfinished tasks at most"));
  CHECK(j.stats().batches_refused == 1);
  // Task 1 ended: there is room for one again, and for no more.
  Commits again_over;
  j.accept(tasks(30, 2), again_over.callback());
  REQUIRE(j.flush(60s).is_ok());
  CHECK(again_over.all().front().code() == Code::kQueueFull);
  accept_all(j, tasks(40, 1));
  const auto log = committed_log(store->path());
  CHECK(log->ids() == std::vector<std::uint64_t>{1, 2, 3, 10, 11, 40});
  REQUIRE(j.unfinished().is_ok());
  CHECK(j.unfinished()->size() == 5);
}

TEST_CASE("ids are checked whether or not they rise above every id seen", "[journal]") {
  TempDir dir;
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(100, 1));
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());  // one round for all below
  Commits rising, repeated, same_round, lower_new, lower_taken;
  j.accept(tasks(200, 2), rising.callback());               // 200, 201: above all
  j.accept({task(300), task(300)}, repeated.callback());    // twice in the batch
  j.accept({task(201), task(202)}, same_round.callback());  // 201: this round accepted it
  j.accept(tasks(5, 2), lower_new.callback());              // 5, 6: below, but new
  j.accept({task(7), task(100)}, lower_taken.callback());   // 100: journaled before
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(j.flush(60s).is_ok());
  CHECK(rising.all().front().is_ok());
  CHECK_FALSE(repeated.all().front().is_ok());
  CHECK_FALSE(same_round.all().front().is_ok());
  CHECK(lower_new.all().front().is_ok());
  CHECK_FALSE(lower_taken.all().front().is_ok());
  const auto log = committed_log(store->path());
  CHECK(log->ids() == std::vector<std::uint64_t>{5, 6, 100, 200, 201});
}

TEST_CASE("dead-lettering a journaled task writes its letter and its end in one transaction",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.busy_timeout = 10ms;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(7, 1));
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  DeadLetter l = letter(7);
  l.task.history = {attempt(1, Outcome::kFailed, "no")};
  Receipts receipts;
  REQUIRE(j.dead_letter(l, receipts.for_task(7)).is_ok());
  REQUIRE(eventually([&] { return store->stats().write_errors >= 2; }));
  CHECK(receipts.size() == 0);
  CHECK(j.find(7)->task.state == TaskState::kQueued);  // neither is written
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  REQUIRE(store->flush(60s).is_ok());
  REQUIRE(receipts.size() == 1);
  const std::uint64_t letter_id = receipts.all().front().second.letter_id;
  REQUIRE(letter_id > 0);
  auto seven = j.find(7);
  REQUIRE(seven.is_ok());
  CHECK(seven->task.state == TaskState::kDeadLettered);
  CHECK(seven->task.reason == DeadReason::kRetriesExhausted);
  CHECK(seven->letter_id == letter_id);
  CHECK(seven->task.history.size() == 1);
  CHECK(store->get(letter_id).is_ok());
  CHECK(j.unfinished()->empty());
}

TEST_CASE("a database of schema version 1 is migrated in place and keeps its letters",
          "[journal]") {
  TempDir dir;
  REQUIRE(::mkdir(dir.state_dir().c_str(), 0700) == 0);
  const std::string path = dir.state_dir() + "/dead_letters.db";
  {
    auto db = raw_connection(path);
    REQUIRE(dead_letter_schema::migrate(db, path, 1).is_ok());
    // As version 1 wrote it (the current insert names columns added since).
    REQUIRE(db.exec(R"sql(
INSERT INTO dead_letters (task_id, pool, type, reason, error, payload, priority, affinity_key,
  dead_lettered_ms)
VALUES (41, 'images', 'resize', 'retries_exhausted', 'boom 41', CAST('payload 41' AS BLOB), 0,
  '', 1000);
)sql",
                    "test: a version 1 letter")
                .is_ok());
    CHECK(pragma_text(db, "PRAGMA user_version") == "1");
  }
  CHECK(committed_rows(path, "sqlite_master", "name = 'tasks'") == 0);
  auto store = open_store(journal_options_in(dir.state_dir()));
  auto db = raw_connection(path);
  CHECK(pragma_text(db, "PRAGMA user_version") == std::to_string(dead_letter_schema::kVersion));
  auto letters = list_all(*store);
  REQUIRE(letters.size() == 1);
  CHECK(letters.front().task.id == 41);
  CHECK(letters.front().payload == "payload 41");
  // The journal works on the migrated file, and its ids start above the letters'.
  TaskJournal& j = journal_of(*store);
  CHECK(*j.highest_task_id() == 41);
  accept_all(j, tasks(42, 2));
  CHECK(j.unfinished()->size() == 2);
}

TEST_CASE("a journal of schema version 2 moves its rows into the round log when it opens",
          "[journal]") {
  TempDir dir;
  REQUIRE(::mkdir(dir.state_dir().c_str(), 0700) == 0);
  const std::string path = dir.state_dir() + "/dead_letters.db";
  {
    auto db = raw_connection(path);
    REQUIRE(dead_letter_schema::migrate(db, path, 2).is_ok());
    REQUIRE(db.exec(R"sql(
INSERT INTO tasks (id, pool, type, payload, timeout_ms, retries, priority, affinity_key,
  queue_ttl_ms, fail_fast, idempotency_key, state, retry_due_ms, running_attempt, running_pid,
  running_since_ms, submitted_ms, updated_ms)
VALUES (5, 'images', 'resize', x'00ff', 1500, 3, -2, 'user-1', NULL, 1, 'key-5', 'retry_wait',
  1700000009999, NULL, NULL, NULL, 1700000000005, 1700000000006),
       (6, 'images', 'resize', x'', NULL, NULL, 0, '', NULL, 0, NULL, 'running', NULL, 2, 4321,
  1700000000100, 1700000000006, 1700000000007);
INSERT INTO tasks (id, pool, type, payload, priority, affinity_key, fail_fast, state, reason,
  result, error, submitted_ms, updated_ms, finished_ms, kept_bytes)
VALUES (7, 'mail', 'send', x'', 0, '', 0, 'completed', '', x'6f6b', '', 1, 2, 1700000000200, 2);
INSERT INTO task_attempts (task_id, number, outcome, error, worker_pid, started_ms, ended_ms)
VALUES (5, 1, 'error', 'again', 4000, 10, 20), (6, 1, 'lost', 'worker died', 4001, 30, 40),
       (7, 1, 'ok', '', 4002, 50, 60);
UPDATE journal_meta SET value = 12 WHERE name = 'highest_task_id';
)sql",
                    "test: version 2 rows")
                .is_ok());
  }
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  auto db = raw_connection(path);
  CHECK(pragma_text(db, "PRAGMA user_version") == std::to_string(dead_letter_schema::kVersion));
  CHECK(committed_rows(path, "sqlite_master", "name IN ('tasks', 'task_attempts')") == 0);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 2);
  const JournalTask& five = (*open)[0];
  CHECK(five.payload == std::string("\0\xff", 2));
  CHECK(five.options.timeout == std::chrono::milliseconds(1500));
  CHECK(five.options.retries == 3u);
  CHECK(five.options.fail_fast);
  CHECK(five.task.state == TaskState::kRetryWait);
  CHECK(five.retry_due_ms == 1700000009999);
  REQUIRE(five.task.history.size() == 1);
  CHECK(five.task.history[0].error == "again");
  const JournalTask& six = (*open)[1];
  CHECK(six.task.state == TaskState::kRunning);
  REQUIRE(six.running);
  CHECK(six.running->worker_pid == 4321);
  CHECK(j.find(7)->task.result == "ok");
  CHECK(j.find_by_key("key-5")->task.id == 5);
  CHECK(*j.highest_task_id() == 12);
  CHECK(committed_tasks(path) == 3);
}

TEST_CASE("retention drops the oldest finished tasks beyond the count bound, and the log follows",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  auto clock = std::make_shared<std::atomic<std::int64_t>>(1000);
  o.now_ms = [clock] { return clock->fetch_add(1); };  // every finish a later ms
  o.journal->max_finished = 100;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 1000));
  for (std::uint64_t id = 1; id <= 1000; ++id) {
    TaskResult r = account(id, TaskState::kCompleted);
    r.result = "r" + std::to_string(id);
    j.finish(r, {});
  }
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(eventually([&] { return j.stats().finished_kept == 100; }));
  CHECK(j.stats().evicted == 900);
  CHECK(j.find(900).status().code() == Code::kNotFound);
  CHECK(j.find(901)->task.result == "r901");
  // The accepts' round is dead and deleted from the file; a reopened journal keeps the
  // hundred newest ends, whatever the log still held.
  REQUIRE(eventually([&] { return j.stats().rounds_deleted >= 1; }));
  REQUIRE(store->close().is_ok());
  auto again = open_store(o);
  TaskJournal& reopened = journal_of(*again);
  CHECK(reopened.stats().finished_kept == 100);
  CHECK(reopened.find(900).status().code() == Code::kNotFound);
  CHECK(reopened.find(901)->task.result == "r901");
}

TEST_CASE("retention deletes finished tasks older than the age bound, unfinished ones never",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  auto clock = std::make_shared<std::atomic<std::int64_t>>(1000000);
  o.now_ms = [clock] { return clock->load(); };
  o.journal->max_finished_age = 60s;
  o.journal->retention_interval = 5ms;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 20));
  for (std::uint64_t id = 1; id <= 10; ++id) j.finish(account(id, TaskState::kCancelled), {});
  REQUIRE(j.flush(60s).is_ok());
  CHECK(j.stats().finished_kept == 10);
  *clock += 61000;
  REQUIRE(eventually([&] { return j.stats().finished_kept == 0; }));
  CHECK(j.stats().evicted == 10);
  CHECK(j.unfinished()->size() == 10);
}

TEST_CASE("retention keeps the finished tasks' kept bytes under the byte bound, newest kept",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  auto clock = std::make_shared<std::atomic<std::int64_t>>(1000);
  o.now_ms = [clock] { return clock->fetch_add(1); };
  o.journal->max_finished_bytes = 10 * 1024;  // ten results of 1 KiB
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 40));
  for (std::uint64_t id = 1; id <= 40; ++id) {
    TaskResult r = account(id, TaskState::kCompleted);
    r.result = std::string(1024, 'x');
    j.finish(r, {});
  }
  REQUIRE(j.flush(60s).is_ok());
  REQUIRE(eventually([&] { return j.stats().finished_bytes <= 10 * 1024; }));
  const auto st = j.stats();
  CHECK(st.finished_kept == 10);
  CHECK(st.evicted == 30);
  CHECK(j.find(30).status().code() == Code::kNotFound);
  CHECK(j.find(31).is_ok());
}

TEST_CASE("compaction carries a task that stays unfinished forward, so the log shrinks behind it",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.journal->max_finished = 10;
  o.journal->compaction_slack = 0;  // the log may hold no more than twice what is live
  {
    auto store = open_store(o);
    TaskJournal& j = journal_of(*store);
    accept_all(j, tasks(1, 1));  // the oldest round: this task never ends
    j.record_start(1, {1, Outcome::kOk, "", 4001, 100, 0});
    for (std::uint64_t batch = 0; batch < 20; ++batch) {
      const std::uint64_t first = 100 + batch * 50;
      accept_all(j, tasks(first, 50));
      for (std::uint64_t id = first; id < first + 50; ++id) {
        j.finish(account(id, TaskState::kCompleted), {});
      }
      REQUIRE(j.flush(60s).is_ok());
    }
    // Without compaction the file would hold 1,001 tasks' records in 21 rounds or more.
    REQUIRE(eventually([&] {
      const auto st = j.stats();
      return st.log_bytes <= 2 * st.log_live_bytes && st.tasks_carried >= 1;
    }));
    const auto log = committed_log(store->path());
    CHECK(log->ids().size() < 100);
    REQUIRE(log->find(1) != nullptr);
    check_same_task(*log->find(1), task(1));
    CHECK(log->find(1)->task.state == TaskState::kRunning);
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 1);
  check_same_task(open->front(), task(1));
  REQUIRE(open->front().running);
  CHECK(open->front().running->worker_pid == 4001);
  CHECK(j.stats().finished_kept == 10);
  CHECK(*j.highest_task_id() == 100 + 20 * 50 - 1);
}

TEST_CASE("recovery reads one pool's unfinished tasks, and names the pools that have any",
          "[journal]") {
  TempDir dir;
  auto store = open_store(journal_options_in(dir.state_dir()));
  TaskJournal& j = journal_of(*store);
  accept_all(j, {task(1, "images"), task(2, "mail"), task(3, "images"), task(4, "reports")});
  Commits finished;
  j.finish(account(4, TaskState::kCompleted), finished.callback());
  REQUIRE(j.flush(60s).is_ok());

  auto pools = j.unfinished_pools();
  REQUIRE(pools.is_ok());
  CHECK(*pools == std::vector<std::string>{"images", "mail"});  // reports has none left
  auto images = j.unfinished("images");
  REQUIRE(images.is_ok());
  REQUIRE(images->size() == 2);
  check_same_task((*images)[0], task(1, "images"));
  check_same_task((*images)[1], task(3, "images"));
  CHECK(j.unfinished("reports")->empty());
  CHECK(j.unfinished()->size() == 3);
}
