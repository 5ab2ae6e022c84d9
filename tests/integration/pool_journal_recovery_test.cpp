// What a Pool created on a journal makes of the rows a previous run left (docs/journal.md,
// "Recovery"): a start that never ended is a lost attempt, a start undone by a dead worker's
// ring is none, and a task of a type the pool no longer serves is dead-lettered.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <string>

#include <sandpool/store/task_journal.hpp>

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

TEST_CASE("a task only queued in a dead worker's ring is never journaled running") {
  char marker[] = "/tmp/sp-journal-init-XXXXXX";
  const int fd = ::mkstemp(marker);
  REQUIRE(fd >= 0);
  ::close(fd);
  ::unlink(marker);  // absent: the first worker starts
  TempDir dir;
  auto store = journaled_store(dir);
  TaskJournal& journal = journal_of(*store);
  auto configurable = [&] {
    PoolOptions o = pool_options("echo", 1);
    o.name = "jobs";
    o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libconfigurable.so";
    o.plugin_config_json = std::string(R"({"fail_init_if": ")") + marker + "\"}";
    o.concurrency = 2;           // both tasks wait in the one worker's ring
    o.max_init_failures = 1000;  // replacements fail their init without failing the pool
    o.dead_letter_store = store;
    return o;
  };
  std::uint64_t front_id = 0, behind_id = 0;
  {
    auto first = make_pool(configurable());
    std::FILE* f = std::fopen(marker, "w");  // from now on no replacement can start
    REQUIRE(f != nullptr);
    std::fclose(f);
    const std::int32_t pid = first->workers().at(0).pid;
    REQUIRE(::kill(pid, SIGSTOP) == 0);  // it takes nothing from its ring
    auto front = first->submit("configurable", "a");
    auto behind = first->submit("configurable", "b");
    REQUIRE(front);
    REQUIRE(behind);
    front_id = front->id();
    behind_id = behind->id();
    REQUIRE(eventually([&] {
      return front->state() == TaskState::kDispatched && behind->state() == TaskState::kDispatched;
    }));
    // The loop hands a turn's records to the journal at the turn's end, after the states
    // the test sees change: the journal catches up.
    const auto journaled = [&](TaskState want) {
      return eventually([&] {
        REQUIRE(journal.flush(60s).is_ok());
        return journal.find(behind_id)->task.state == want;
      });
    };
    // In the ring of a worker that started nothing: no start is journaled for either.
    REQUIRE(journal.flush(60s).is_ok());
    for (const std::uint64_t id : {front_id, behind_id}) {
      auto row = journal.find(id);
      REQUIRE(row.is_ok());
      CHECK(row->task.state == TaskState::kQueued);
      CHECK_FALSE(row->running);
    }
    REQUIRE(first->kill_worker(pid, SIGKILL).is_ok());
    // The front is charged with the death; the one behind it goes back to the queue, where
    // it stays: no worker can start.
    REQUIRE(eventually([&] {
      return front->snapshot().history.size() == 1 && behind->state() == TaskState::kQueued;
    }));
    REQUIRE(journaled(TaskState::kQueued));
    auto row = journal.find(behind_id);
    REQUIRE(row.is_ok());
    CHECK(row->task.state == TaskState::kQueued);
    CHECK_FALSE(row->running);
    CHECK(row->task.history.empty());
    CHECK(first->shutdown(0ms) == 2);  // kept
  }
  ::unlink(marker);  // the next pool's workers start

  auto second = make_pool(configurable());
  auto behind = second->find(behind_id);
  REQUIRE(behind);
  REQUIRE(behind->wait_for(kPatience));
  const TaskResult b = behind->wait();
  CHECK(b.state == TaskState::kCompleted);
  CHECK(b.result == "b");
  REQUIRE(b.history.size() == 1);  // no lost attempt for the death it was not charged with
  CHECK(b.history[0].number == 1);
  auto front = second->find(front_id);
  REQUIRE(front);
  REQUIRE(front->wait_for(kPatience));
  const TaskResult a = front->wait();
  CHECK(a.state == TaskState::kCompleted);
  REQUIRE(a.history.size() == 2);
  CHECK(a.history[0].outcome == Outcome::kLost);
  CHECK(a.history[1].number == 2);
}

TEST_CASE("a recovered task whose type the pool no longer serves is dead-lettered permanent") {
  TempDir dir;
  auto store = journaled_store(dir);
  TaskJournal& journal = journal_of(*store);
  // Accepted while the pool "jobs" served "resize" too.
  plant(journal, 7, "resize", std::nullopt);
  plant(journal, 8, "resize", Attempt{1, Outcome::kOk, {}, 4242, 1700000000000, 0});
  plant(journal, 9, "sleep", std::nullopt);

  auto pool = make_pool(sleep_pool(store));
  const std::string why =
      "unknown task type 'resize' (this pool serves: sleep); it was accepted before the pool's "
      "task types changed";
  auto queued = pool->find(7);
  REQUIRE(queued);
  REQUIRE(queued->wait_for(kPatience));
  const TaskResult q = queued->wait();
  CHECK(q.state == TaskState::kDeadLettered);
  CHECK(q.reason == DeadReason::kPermanent);
  CHECK(q.error == why);
  CHECK(q.history.empty());  // never sent to a worker
  auto running = pool->find(8);
  REQUIRE(running);
  REQUIRE(running->wait_for(kPatience));
  const TaskResult r = running->wait();
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  CHECK(r.error == why);
  REQUIRE(r.history.size() == 1);  // the run the last pool lost, not retried
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error == "poold restarted");
  auto served = pool->find(9);
  REQUIRE(served);
  REQUIRE(served->wait_for(kPatience));
  CHECK(served->wait().state == TaskState::kCompleted);

  pool->close();
  REQUIRE(store->flush(60s).is_ok());
  CHECK(journal.unfinished()->empty());
  auto letters = list_all(*store);
  REQUIRE(letters.size() == 2);
  for (const DeadLetter& l : letters) {
    CHECK(l.task.reason == DeadReason::kPermanent);
    CHECK(l.task.error == why);
    CHECK(journal.find(l.task.id)->task.state == TaskState::kDeadLettered);
  }
}
