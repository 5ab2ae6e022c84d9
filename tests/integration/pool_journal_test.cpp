// A real Pool on a store opened with a task journal (docs/journal.md): acknowledged means
// committed, reported means committed, a refused accept cancels its task, and a Pool created
// on the journal a previous Pool left behind runs that pool's unfinished tasks again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/store/task_journal.hpp>

#include "pool_journal_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::committed_log;
using sandpool::testing::committed_tasks;
using sandpool::testing::eventually;
using sandpool::testing::journal_of;
using sandpool::testing::journaled_store;
using sandpool::testing::kPatience;
using sandpool::testing::list_all;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::raw_connection;
using sandpool::testing::sleep_pool;
using sandpool::testing::TempDir;
using sandpool::testing::wait_running;

namespace {

// What on_accepted was told, by task id; thread-safe.
class Acks {
 public:
  void into(SubmitOptions& so) {
    so.on_accepted = [this](std::uint64_t id, const Status& s) {
      std::lock_guard lock(mu_);
      got_.emplace_back(id, s);
    };
  }
  std::vector<std::pair<std::uint64_t, Status>> all() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::uint64_t, Status>> got_;
};

}  // namespace

TEST_CASE("a journaled task is acknowledged and reported only once its rows are committed") {
  TempDir dir;
  auto store = journaled_store(dir, 60s);  // the writer waits for the test's lock
  auto pool = make_pool(sleep_pool(store));
  TaskJournal& journal = journal_of(*store);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  Acks acks;
  SubmitOptions so;
  acks.into(so);
  auto t = pool->submit("sleep", "1", so);
  REQUIRE(t);
  // It runs before its commit: its end queues up behind the accept, with its start if the
  // loop saw the worker start it before its result came (docs/journal.md). A query is
  // answered between the loop's turns, after the turn that queued the end handed it over.
  REQUIRE(eventually([&] { return pool->workers().at(0).tasks_done == 1; }));
  const std::uint64_t pending = journal.stats().pending;
  CHECK((pending == 2 || pending == 3));
  CHECK(acks.all().empty());
  CHECK_FALSE(t->acceptance().has_value());
  CHECK_FALSE(t->done());
  CHECK(committed_tasks(store->path()) == 0);

  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  CHECK(t->wait_accepted().is_ok());
  REQUIRE(t->wait_for(kPatience));
  CHECK(t->wait().state == TaskState::kCompleted);
  CHECK(t->wait().result == "slept 1 ms");
  auto row = journal.find(t->id());  // reported means written
  REQUIRE(row.is_ok());
  CHECK(row->task.state == TaskState::kCompleted);
  const auto log = committed_log(store->path());  // in the file, for another connection too
  REQUIRE(log->find(t->id()) != nullptr);
  CHECK(log->find(t->id())->task.state == TaskState::kCompleted);
  CHECK(row->task.result == "slept 1 ms");
  REQUIRE(acks.all().size() == 1);
  CHECK(acks.all()[0].first == t->id());
  CHECK(acks.all()[0].second.is_ok());
}

TEST_CASE("a task whose accept the journal refuses is cancelled with the storage error") {
  TempDir dir;
  auto store = journaled_store(dir, 10ms);  // a lock held longer refuses the batch
  auto pool = make_pool(sleep_pool(store));
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  Acks acks;
  SubmitOptions so;
  acks.into(so);
  auto t = pool->submit("sleep", "60000", so);
  REQUIRE(t);
  const Status refused = t->wait_accepted();
  CHECK_FALSE(refused.is_ok());
  CHECK_THAT(refused.message(), Catch::StartsWith("storage: "));
  REQUIRE(t->wait_for(kPatience));
  const TaskResult r = t->wait();
  CHECK(r.state == TaskState::kCancelled);
  CHECK(r.error == refused.message());
  REQUIRE(acks.all().size() == 1);
  CHECK_FALSE(acks.all()[0].second.is_ok());

  // The refusal turned the journal failing (docs/journal.md, "A failing disk"): submits are
  // refused at once while the lock is held.
  auto meanwhile = pool->submit("sleep", "1");
  REQUIRE(meanwhile);
  CHECK_THAT(meanwhile->wait_accepted().message(), Catch::Contains("the journal is failing"));
  CHECK(journal_of(*store).stats().writes_failing);

  // Once the lock is gone the journal's probe finds the database writable and the pool
  // accepts again, and the refused task is not in the journal.
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  std::optional<Ticket> next;
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!next && std::chrono::steady_clock::now() < until) {
    auto one = pool->submit("sleep", "1");
    REQUIRE(one);
    if (one->wait_accepted().is_ok()) {
      next = *one;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the probe has not run yet
    }
  }
  REQUIRE(next);
  CHECK_FALSE(journal_of(*store).stats().writes_failing);
  REQUIRE(next->wait_for(kPatience));
  CHECK(next->wait().state == TaskState::kCompleted);
  CHECK(journal_of(*store).find(t->id()).status().code() == Code::kNotFound);
}

TEST_CASE("a task a shutdown stopped while it ran runs again without using up an attempt") {
  TempDir dir;
  std::uint64_t running_id = 0;
  std::vector<std::uint64_t> queued_ids;
  {
    auto store = journaled_store(dir);
    auto first = make_pool(sleep_pool(store));
    auto running = first->submit("sleep", "60000");
    REQUIRE(running);
    running_id = running->id();
    for (int i = 0; i < 2; ++i) {
      auto q = first->submit("sleep", "1");
      REQUIRE(q);
      REQUIRE(q->wait_accepted().is_ok());
      queued_ids.push_back(q->id());
    }
    REQUIRE(running->wait_accepted().is_ok());
    wait_running(*running);
    CHECK(first->shutdown(0ms) == 3);  // kept in the journal, not dead-lettered
    const TaskResult r = running->wait();
    CHECK(r.state == TaskState::kCancelled);
    CHECK(r.cancel_reason == CancelReason::kShutdown);
    first.reset();
    REQUIRE(store->close().is_ok());  // commits what the shutdown queued
  }
  auto store = journaled_store(dir);  // what the closed store left on disk
  auto open = journal_of(*store).unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 3);
  for (const JournalTask& t : *open) {
    INFO("task " << t.task.id);
    CHECK(t.task.state == TaskState::kQueued);
    CHECK_FALSE(t.running);
    CHECK(t.task.history.empty());
  }
  CHECK(list_all(*store).empty());

  PoolOptions o = sleep_pool(store);
  o.retries = 0;  // an attempt charged for the shutdown would have been its last
  auto second = make_pool(o);
  auto again = second->find(running_id);
  REQUIRE(again);
  wait_running(*again);  // the lowest id: first on the only worker
  CHECK(again->snapshot().history.empty());
  REQUIRE(again->cancel());
  REQUIRE(again->wait_for(kPatience));
  const TaskResult a = again->wait();
  CHECK(a.state == TaskState::kCancelled);
  REQUIRE(a.history.size() == 1);  // the run of this pool, numbered as its first
  CHECK(a.history[0].number == 1);
  CHECK(a.history[0].outcome != Outcome::kLost);
  for (std::uint64_t id : queued_ids) {
    auto q = second->find(id);
    REQUIRE(q);
    REQUIRE(q->wait_for(kPatience));
    CHECK(q->wait().state == TaskState::kCompleted);
    CHECK(q->wait().result == "slept 1 ms");
    REQUIRE(q->wait().history.size() == 1);
    CHECK(q->wait().history[0].number == 1);
  }
  // New ids start above every journaled one.
  auto fresh = second->submit("sleep", "1");
  REQUIRE(fresh);
  CHECK(fresh->id() > std::max(running_id, queued_ids.back()));
  REQUIRE(fresh->wait_for(kPatience));
  second->close();
  REQUIRE(store->flush(60s).is_ok());
  CHECK(journal_of(*store).unfinished()->empty());
  CHECK(list_all(*store).empty());
}

TEST_CASE("a task waiting to retry keeps its journaled due time across pools") {
  TempDir dir;
  auto store = journaled_store(dir);
  auto flaky = [&] {
    PoolOptions o = pool_options("flaky", 1);
    o.name = "jobs";
    o.retry.base = std::chrono::hours(10);  // full jitter below 10 h: due long after the test
    o.retry.max = std::chrono::hours(10);
    o.dead_letter_store = store;
    return o;
  };
  std::uint64_t id = 0;
  {
    auto first = make_pool(flaky());
    auto t = first->submit("flaky", "x");
    REQUIRE(t);
    id = t->id();
    REQUIRE(eventually([&] { return t->state() == TaskState::kRetryWait; }));
    CHECK(first->shutdown(0ms) == 1);
  }
  REQUIRE(journal_of(*store).flush(60s).is_ok());
  auto before = journal_of(*store).find(id);
  REQUIRE(before.is_ok());
  REQUIRE(before->task.state == TaskState::kRetryWait);
  REQUIRE(before->task.history.size() == 1);
  CHECK(before->task.history[0].outcome == Outcome::kError);
  CHECK(before->retry_due_ms > 0);

  auto second = make_pool(flaky());
  auto t = second->find(id);
  REQUIRE(t);
  CHECK(t->state() == TaskState::kRetryWait);
  CHECK(t->snapshot().history.size() == 1);
  CHECK(second->stats().retry_wait == 1);
  CHECK(second->shutdown(0ms) == 1);
  REQUIRE(journal_of(*store).flush(60s).is_ok());
  auto after = journal_of(*store).find(id);
  REQUIRE(after.is_ok());
  CHECK(after->task.state == TaskState::kRetryWait);
  CHECK(after->retry_due_ms == before->retry_due_ms);
}

TEST_CASE("a batch shares one accept: its tasks are committed or refused together") {
  std::mutex mu;
  std::vector<Status> answers;  // outlives the store, whose writer thread delivers to it
  TempDir dir;
  auto store = journaled_store(dir, 10ms);
  auto pool = make_pool(sleep_pool(store));
  TaskJournal& journal = journal_of(*store);
  auto batch_of = [](int n, const std::string& payload) {
    std::vector<BatchTask> tasks;
    for (int i = 0; i < n; ++i) tasks.push_back({"sleep", payload, {}});
    return tasks;
  };
  auto on_batch = [&](const Status& s) {
    std::lock_guard lock(mu);
    answers.push_back(s);
  };
  auto answered = [&] {
    std::lock_guard lock(mu);
    return answers;
  };

  SECTION("refused while the database is locked: every task cancelled, one answer") {
    auto locker = raw_connection(store->path());
    REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());
    auto results = pool->submit_batch(batch_of(5, "60000"), on_batch);
    REQUIRE(results.size() == 5);
    for (auto& r : results) {
      REQUIRE(r);
      CHECK_THAT(r->wait_accepted().message(), Catch::StartsWith("storage: "));
      REQUIRE(r->wait_for(kPatience));
      CHECK(r->wait().state == TaskState::kCancelled);
    }
    REQUIRE(eventually([&] { return answered().size() == 1; }));
    CHECK_FALSE(answered()[0].is_ok());
    CHECK(journal.stats().batches_refused == 1);  // one accept for the five
    REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  }
  SECTION("committed: one answer, every task runs") {
    auto results = pool->submit_batch(batch_of(5, "1"), on_batch);
    REQUIRE(results.size() == 5);
    for (auto& r : results) {
      REQUIRE(r);
      CHECK(r->wait_accepted().is_ok());
      REQUIRE(r->wait_for(kPatience));
      CHECK(r->wait().state == TaskState::kCompleted);
    }
    REQUIRE(eventually([&] { return answered().size() == 1; }));
    CHECK(answered()[0].is_ok());
    CHECK(journal.stats().tasks_accepted == 5);
  }
  SECTION("a refusal by the pool refuses the rest without trying them") {
    std::vector<BatchTask> tasks = batch_of(2, "1");
    tasks.insert(tasks.begin() + 1, BatchTask{"sleep", std::string(9u << 20, 'x'), {}});
    auto results = pool->submit_batch(std::move(tasks), on_batch);
    REQUIRE(results.size() == 3);
    CHECK(results[0]);
    CHECK(results[1].status().code() == Code::kTooLarge);  // its own fault: the rest go on
    CHECK(results[2]);
    REQUIRE(results[2]->wait_for(kPatience));
    pool->close();
    const std::uint64_t accepted = journal.stats().tasks_accepted;
    auto closed = pool->submit_batch(batch_of(2, "1"), on_batch);
    CHECK(closed[0].status().code() == Code::kClosed);
    CHECK(closed[1].status().code() == Code::kClosed);
    REQUIRE(journal.flush(60s).is_ok());
    CHECK(journal.stats().tasks_accepted == accepted);  // nothing journaled for a closed pool
  }
}

TEST_CASE("ends committed after their Pool is gone still end their tasks") {
  TempDir dir;
  auto store = journaled_store(dir, 60s);  // the writer waits for the test's lock
  PoolOptions o = sleep_pool(store);
  o.concurrency = 16;  // a ring of quick tasks: their ends come back several a turn
  auto pool = make_pool(std::move(o));
  TaskJournal& journal = journal_of(*store);
  auto locker = raw_connection(store->path());
  REQUIRE(locker.exec("BEGIN IMMEDIATE", "test lock").is_ok());

  // Quick tasks run before their commit: the loop queues their ends (several a turn, answered
  // by one callback) behind the batch's accept and the starts it saw.
  constexpr int kTasks = 64;
  std::vector<BatchTask> batch;
  for (int i = 0; i < kTasks; ++i) batch.push_back({"sleep", "0", {}});
  std::vector<Ticket> tickets;
  for (auto& r : pool->submit_batch(std::move(batch), {})) {
    REQUIRE(r);
    tickets.push_back(*r);
  }
  REQUIRE(eventually([&] {
    std::uint64_t done = 0;
    for (const WorkerInfo& w : pool->workers()) done += w.tasks_done;
    return done == kTasks;
  }));
  const std::uint64_t pending = journal.stats().pending;
  CHECK(pending >= 1 + kTasks);
  CHECK(pending <= 1 + 2 * kTasks);
  for (const Ticket& t : tickets) CHECK_FALSE(t.done());

  pool.reset();  // its loop ends with the ends still being written, and is destroyed
  REQUIRE(locker.exec("COMMIT", "test unlock").is_ok());
  for (const Ticket& t : tickets) {
    REQUIRE(t.wait_for(kPatience));
    CHECK(t.wait().state == TaskState::kCompleted);
    CHECK(t.wait().result == "slept 0 ms");
  }
  CHECK(journal.stats().pending == 0);
}
