// What a Pool created on a journal makes of the rows a previous run left (docs/journal.md,
// "Recovery"): a start that never ended is a lost attempt.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <string>

#include <sandpool/task_journal.hpp>

#include "pool_journal_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::eventually;
using sandpool::testing::journal_of;
using sandpool::testing::journaled_store;
using sandpool::testing::kPatience;
using sandpool::testing::list_all;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::sleep_pool;
using sandpool::testing::TempDir;

namespace {

// Plants the rows a previous run left: task `id` of pool "jobs", accepted, and started when
// `start` is set.
void plant(TaskJournal& journal, std::uint64_t id, const std::string& type,
           std::optional<Attempt> start) {
  JournalTask row;
  row.task.id = id;
  row.task.type = type;
  row.pool = "jobs";
  row.payload = "1";
  std::atomic<bool> accepted{false};
  journal.accept({row}, [&](const Status& s) { accepted = s.is_ok(); });
  if (start) journal.record_start(id, *start);
  REQUIRE(journal.flush(60s).is_ok());
  REQUIRE(accepted);
}

}  // namespace

TEST_CASE("a task journaled running when its pool died gets a lost attempt: poold restarted") {
  TempDir dir;
  auto store = journaled_store(dir);
  TaskJournal& journal = journal_of(*store);
  // What a pool killed mid-task leaves: the accept and the start committed, no end.
  plant(journal, 41, "sleep", Attempt{1, Outcome::kOk, {}, 4242, 1700000000000, 0});

  SECTION("with a retry left it runs again") {
    auto pool = make_pool(sleep_pool(store));
    auto t = pool->find(41);
    REQUIRE(t);
    REQUIRE(t->wait_for(kPatience));
    const TaskResult r = t->wait();
    CHECK(r.state == TaskState::kCompleted);
    REQUIRE(r.history.size() == 2);
    CHECK(r.history[0].number == 1);
    CHECK(r.history[0].outcome == Outcome::kLost);
    CHECK(r.history[0].error == "poold restarted");
    CHECK(r.history[0].worker_pid == 4242);
    CHECK(r.history[0].started_ms == 1700000000000);
    CHECK(r.history[1].number == 2);
    CHECK(r.history[1].outcome == Outcome::kOk);
  }
  SECTION("when the lost attempt is its last it is dead-lettered") {
    PoolOptions o = sleep_pool(store);
    o.retries = 0;
    auto pool = make_pool(o);
    auto t = pool->find(41);
    REQUIRE(t);
    REQUIRE(t->wait_for(kPatience));
    const TaskResult r = t->wait();
    CHECK(r.state == TaskState::kDeadLettered);
    CHECK(r.reason == DeadReason::kRetriesExhausted);
    REQUIRE(r.history.size() == 1);
    CHECK(r.history[0].outcome == Outcome::kLost);
    pool->close();
    REQUIRE(store->flush(60s).is_ok());
    auto ended = journal.find(41);
    REQUIRE(ended.is_ok());
    CHECK(ended->task.state == TaskState::kDeadLettered);
    REQUIRE(list_all(*store).size() == 1);
    CHECK(list_all(*store)[0].task.id == 41);
  }
}
