// Dead letters through a real Pool into the SQLite store, and back by replay.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include <sandpool/store/dead_letters.hpp>
#include "dead_letter_support.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

using sandpool::testing::configurable;
using sandpool::testing::open_store;
using TempDir = sandpool::testing::StateDir;

TEST_CASE("a dead-lettered task lands in the store and a replay completes it with its id") {
  TempDir dir;
  auto store = open_store(dir.path);
  std::uint64_t task_id = 0;
  {
    auto failing = make_pool(configurable("images", true, store));
    SubmitOptions so;
    so.priority = 7;
    auto r = run(*failing, "configurable", std::string("pay\0load", 8), so);
    REQUIRE(r.state == TaskState::kDeadLettered);
    task_id = r.id;
  }
  REQUIRE(store->flush(10s));
  auto listed = store->list({}, {});
  REQUIRE(listed);
  REQUIRE(listed->letters.size() == 1);
  const DeadLetter& letter = listed->letters[0];
  CHECK(letter.task.id == task_id);
  CHECK(letter.pool == "images");
  CHECK(letter.payload == std::string("pay\0load", 8));
  CHECK(letter.options.priority == 7);
  CHECK(letter.task.reason == DeadReason::kPermanent);
  REQUIRE(letter.task.history.size() == 1);
  CHECK(letter.task.history[0].error == "configured to fail");

  // The same pool, fixed: the replay runs with the task's id and fresh attempts.
  auto fixed = make_pool(configurable("images", false, store));
  auto t = fixed->replay(letter.letter_id);
  REQUIRE(t);
  auto r = t->wait();
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.id == task_id);
  CHECK(r.attempts() == 1);
  CHECK(r.result == std::string("pay\0load", 8));
  // It left the store once accepted; a second replay finds nothing.
  CHECK(store->list({}, {})->letters.empty());
  auto again = fixed->replay(letter.letter_id);
  REQUIRE_FALSE(again);
  CHECK(again.status().code() == Code::kNotFound);
}

TEST_CASE("a hung task's backtrace survives into the dead-letter store") {
  TempDir dir;
  auto store = open_store(dir.path);
  {
    PoolOptions o = pool_options("echo", 1);
    o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libhang.so";
    o.timeout = 200ms;
    o.retries = 0;
    o.backtrace_grace = 2000ms;
    o.dead_letter_store = store;
    auto pool = make_pool(o);
    auto r = run(*pool, "hang", "");
    REQUIRE(r.state == TaskState::kDeadLettered);
  }
  REQUIRE(store->flush(10s));
  auto listed = store->list({}, {});
  REQUIRE(listed);
  REQUIRE(listed->letters.size() == 1);
  const auto& history = listed->letters[0].task.history;
  REQUIRE(history.size() == 1);
  CHECK(history[0].outcome == Outcome::kTimedOut);
  CHECK(history[0].backtrace.find("(task thread)\n#0 hang_spin_forever+0x") != std::string::npos);
  CHECK(history[0].backtrace.find("(libhang.so)") != std::string::npos);
}

TEST_CASE("a letter is not replayed into a pool it does not belong to") {
  TempDir dir;
  auto store = open_store(dir.path);
  {
    auto failing = make_pool(configurable("images", true, store));
    REQUIRE(run(*failing, "configurable", "x").state == TaskState::kDeadLettered);
  }
  REQUIRE(store->flush(10s));
  auto letters = store->list({}, {})->letters;
  REQUIRE(letters.size() == 1);
  auto other = make_pool(configurable("thumbnails", false, store));
  auto t = other->replay(letters[0].letter_id);
  REQUIRE_FALSE(t);
  CHECK(t.status().code() == Code::kInvalidArgument);
  CHECK(store->list({}, {})->letters.size() == 1);  // still there
}

TEST_CASE("a burst of 10,000 tasks where 10% crash their worker: every task ends once") {
  TempDir dir;
  auto store = open_store(dir.path);
  PoolOptions o = configurable("burst", false, store);
  o.workers = 2;
  o.retries = 1;
  o.max_restarts = 100000;  // this test is about losing nothing, not about crash loops
  auto pool = make_pool(o);
  constexpr int kTasks = 10000;
  std::mutex mu;
  std::map<std::uint64_t, int> ends;  // task id -> on_done calls
  std::map<std::uint64_t, std::string> payload_of;
  std::size_t completed = 0, dead = 0;
  for (int i = 0; i < kTasks; ++i) {
    const std::string payload = (i % 10 == 3 ? "crash-" : "ok-") + std::to_string(i);
    SubmitOptions so;
    so.on_done = [&](const TaskResult& r) {
      std::lock_guard lock(mu);
      ++ends[r.id];
      if (r.state == TaskState::kCompleted) ++completed;
      if (r.state == TaskState::kDeadLettered) ++dead;
    };
    auto t = pool->submit("configurable", payload, so);
    REQUIRE(t);
    payload_of[t->id()] = payload;
  }
  pool->wait_idle();
  std::lock_guard lock(mu);
  CHECK(ends.size() == static_cast<std::size_t>(kTasks));
  CHECK(std::all_of(ends.begin(), ends.end(), [](const auto& kv) { return kv.second == 1; }));
  CHECK(completed == 9000);
  CHECK(dead == 1000);
  REQUIRE(store->flush(60s));
  std::size_t stored = 0;
  DeadLetterPage page;
  page.limit = 500;
  for (;;) {
    auto l = store->list({}, page);
    REQUIRE(l);
    for (const auto& letter : l->letters) {
      ++stored;
      CHECK(letter.payload.rfind("crash-", 0) == 0);
      CHECK(letter.payload == payload_of[letter.task.id]);
      CHECK(letter.task.reason == DeadReason::kRetriesExhausted);
      CHECK(letter.task.history.size() == 2);
    }
    if (!l->next) break;
    page.after = l->next;
  }
  CHECK(stored == 1000);
}

TEST_CASE("replay by filter replays every matching letter once and leaves the others") {
  TempDir dir;
  auto store = open_store(dir.path);
  {
    auto failing = make_pool(configurable("images", true, store));
    for (int i = 0; i < 5; ++i) {
      SubmitOptions so;
      so.priority = i;
      REQUIRE(run(*failing, "configurable", "x" + std::to_string(i), so).state ==
              TaskState::kDeadLettered);
    }
    auto other = make_pool(configurable("thumbnails", true, store));
    REQUIRE(run(*other, "configurable", "t").state == TaskState::kDeadLettered);
  }
  REQUIRE(store->flush(10s));
  REQUIRE(store->list({}, {})->letters.size() == 6);

  // Still failing: every replayed task dies again and becomes a new letter, which the same
  // call must not pick up a second time.
  {
    auto failing = make_pool(configurable("images", true, store));
    auto report = failing->replay_matching(DeadLetterFilter{});
    REQUIRE(report);
    CHECK(report->tickets.size() == 5);
    CHECK(report->failed == 0);
    for (const Ticket& t : report->tickets) CHECK(t.wait().state == TaskState::kDeadLettered);
  }
  REQUIRE(store->flush(10s));
  DeadLetterFilter images;
  images.pool = "images";
  CHECK(store->list(images, {})->letters.size() == 5);  // the five new letters

  // Fixed: replay all of "images"; the "thumbnails" letter stays.
  auto fixed = make_pool(configurable("images", false, store));
  auto report = fixed->replay_matching(images);
  REQUIRE(report);
  REQUIRE(report->tickets.size() == 5);
  for (const Ticket& t : report->tickets) CHECK(t.wait().state == TaskState::kCompleted);
  auto left = store->list({}, {})->letters;
  REQUIRE(left.size() == 1);
  CHECK(left[0].pool == "thumbnails");

  DeadLetterFilter thumbs;
  thumbs.pool = "thumbnails";
  auto wrong = fixed->replay_matching(thumbs);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.status().code() == Code::kInvalidArgument);
}

TEST_CASE("a pool finds a task by id after its submitter let go of it") {
  auto pool = make_pool(configurable("images", false, nullptr));
  std::uint64_t id = 0;
  {
    auto t = pool->submit("configurable", "hello");
    REQUIRE(t);
    id = t->id();
    REQUIRE(t->wait().state == TaskState::kCompleted);
  }
  auto found = pool->find(id);
  REQUIRE(found);
  auto r = found->snapshot();
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "hello");
  CHECK(r.attempts() == 1);
  CHECK_FALSE(pool->find(id + 1000));
}

TEST_CASE("pools that share a task id counter never hand out the same id") {
  auto ids = std::make_shared<std::atomic<std::uint64_t>>(1000);
  PoolOptions a = configurable("a", false, nullptr);
  a.task_ids = ids;
  PoolOptions b = configurable("b", false, nullptr);
  b.task_ids = ids;
  auto pa = make_pool(a);
  auto pb = make_pool(b);
  auto ta = pa->submit("configurable", "1");
  auto tb = pb->submit("configurable", "2");
  REQUIRE(ta);
  REQUIRE(tb);
  CHECK(ta->id() == 1000);
  CHECK(tb->id() == 1001);
  CHECK_FALSE(pa->find(tb->id()));
}
