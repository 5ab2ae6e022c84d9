// The task journal keeps an unfinished task in memory without its payload and options, and
// reads them back from the log (docs/journal.md, "What the state keeps of a task"): its
// answers (find, find_by_key, unfinished) must stay what a replay of its file builds, while
// records move tasks, compaction carries them and retention evicts, and across a reopen.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

#include <sandpool/store/task_journal.hpp>

#include "task_journal_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;

namespace {

// Every field of a journaled task.
void check_whole(const JournalTask& got, const JournalTask& want) {
  check_same_task(got, want);
  INFO("task " << want.task.id);
  CHECK(got.task.state == want.task.state);
  CHECK(got.task.reason == want.task.reason);
  CHECK(got.task.cancel_reason == want.task.cancel_reason);
  CHECK(got.task.result == want.task.result);
  CHECK(got.task.error == want.task.error);
  CHECK(got.retry_due_ms == want.retry_due_ms);
  CHECK(got.finished_ms == want.finished_ms);
  CHECK(got.letter_id == want.letter_id);
  REQUIRE(got.running.has_value() == want.running.has_value());
  if (got.running) check_same_attempt(*got.running, *want.running);
  REQUIRE(got.task.history.size() == want.task.history.size());
  for (std::size_t i = 0; i < got.task.history.size(); ++i) {
    check_same_attempt(got.task.history[i], want.task.history[i]);
  }
}

// What the journal answers equals what a replay of its committed file builds: each task by
// id, and the unfinished ones all at once.
void check_answers_replay(TaskJournal& j, const std::string& path) {
  REQUIRE(j.flush(60s).is_ok());
  const auto log = committed_log(path);
  std::size_t open = 0;
  for (const auto& [id, want] : log->tasks) {
    auto got = j.find(id);
    if (is_terminal(want.task.state) && !got) continue;  // evicted by retention since
    INFO("task " << id);
    REQUIRE(got.is_ok());
    check_whole(*got, want);
    open += is_terminal(want.task.state) ? 0 : 1;
  }
  auto unfinished = j.unfinished();
  REQUIRE(unfinished.is_ok());
  REQUIRE(unfinished->size() == open);
  for (const JournalTask& t : *unfinished) {
    REQUIRE(log->find(t.task.id) != nullptr);
    check_whole(t, *log->find(t.task.id));
  }
}

// Tasks of a few shapes: options shared by many, and each one's own (a key, a schedule).
JournalTask varied_task(std::uint64_t id, std::mt19937_64& rng) {
  JournalTask t;
  t.task.id = id;
  t.task.type = rng() % 2 == 0 ? "resize" : "mail";
  t.pool = rng() % 3 == 0 ? "images" : "default";
  t.payload = std::string(rng() % 200, static_cast<char>('a' + id % 26)) + std::string("\0x", 2);
  if (rng() % 4 == 0) t.options.timeout = std::chrono::milliseconds(1000 + rng() % 3);
  if (rng() % 4 == 0) t.options.priority = static_cast<std::int32_t>(rng() % 3) - 1;
  if (rng() % 5 == 0) t.options.idempotency_key = "key-" + std::to_string(rng() % 50);
  if (rng() % 7 == 0) {
    REQUIRE(t.options.set_not_before_ms(1700000000000 + static_cast<std::int64_t>(rng() % 1000)));
  }
  if (rng() % 6 == 0) t.options.tenant = "tenant-" + std::to_string(rng() % 4);
  return t;
}

Attempt ended_attempt(std::uint32_t number, std::uint64_t salt) {
  return {number, Outcome::kError, "boom " + std::to_string(salt), 4000, 100, 150, ""};
}

}  // namespace

TEST_CASE("the journal answers what a replay of its file builds while compaction carries tasks",
          "[journal]") {
  const std::uint64_t seed = GENERATE(1, 2, 3);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.journal->max_finished = 40;
  o.journal->compaction_slack = 0;  // carries as soon as the log holds twice what is live
  std::uint64_t next_id = 1;
  std::vector<std::uint64_t> open;               // accepted, not finished
  std::map<std::uint64_t, std::uint32_t> tries;  // attempts so far
  {
    auto store = open_store(o);
    TaskJournal& j = journal_of(*store);
    for (int round = 0; round < 30; ++round) {
      std::vector<JournalTask> batch;
      for (int k = 0; k < 20; ++k) batch.push_back(varied_task(next_id++, rng));
      for (const JournalTask& t : batch) open.push_back(t.task.id);
      accept_all(j, std::move(batch));
      for (std::size_t k = 0; k < open.size();) {
        const std::uint64_t id = open[k];
        const std::uint32_t n = tries[id] + 1;
        switch (rng() % 6) {
          case 0:
            j.record_start(id, {n, Outcome::kOk, "", 4000, 100, 0});
            break;
          case 1:
            j.record_requeue(id);
            break;
          case 2:
            j.record_attempt(id, ended_attempt(n, rng()),
                             rng() % 2 == 0 ? TaskState::kRetryWait : TaskState::kQueued,
                             1700000000000 + static_cast<std::int64_t>(rng() % 1000));
            tries[id] = n;
            break;
          case 3: {
            TaskResult end = account(id, TaskState::kCompleted);
            end.result = "done " + std::to_string(id);
            j.finish(end, {});
            open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
            continue;
          }
          default:
            break;  // waits
        }
        ++k;
      }
      if (round % 10 == 9) check_answers_replay(j, store->path());
    }
    REQUIRE(eventually([&] { return j.stats().tasks_carried > 0; }));
    check_answers_replay(j, store->path());
    REQUIRE(store->close().is_ok());
  }
  auto store = open_store(o);
  check_answers_replay(journal_of(*store), store->path());
}

TEST_CASE("find reads an unfinished task back whole while compaction keeps carrying it",
          "[journal]") {
  TempDir dir;
  auto o = journal_options_in(dir.state_dir());
  o.journal->max_finished = 10;
  o.journal->compaction_slack = 0;
  auto store = open_store(o);
  TaskJournal& j = journal_of(*store);
  accept_all(j, tasks(1, 1));  // never ends: carried again and again
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0}, wrong{0};
  std::thread reader([&] {
    while (!stop) {
      auto t = j.find(1);
      auto by_key = j.find_by_key("key-1");
      if (!t || !by_key || t->payload != task(1).payload || by_key->payload != t->payload) {
        ++wrong;
      }
      ++reads;
    }
  });
  for (std::uint64_t batch = 0; batch < 40; ++batch) {
    const std::uint64_t first = 100 + batch * 50;
    accept_all(j, tasks(first, 50));
    for (std::uint64_t id = first; id < first + 50; ++id) {
      j.finish(account(id, TaskState::kCompleted), {});
    }
    REQUIRE(j.flush(60s).is_ok());
  }
  REQUIRE(eventually([&] { return j.stats().tasks_carried >= 5 && reads > 100; }));
  stop = true;
  reader.join();
  CHECK(wrong == 0);
  auto open = j.unfinished();
  REQUIRE(open.is_ok());
  REQUIRE(open->size() == 1);
  check_same_task(open->front(), task(1));
}
