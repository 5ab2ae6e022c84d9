// Replays racing each other, replays refused by their pool, and the callbacks a replayer
// gives the replayed task: through real Pools and a real SQLite store.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <latch>
#include <thread>

#include <sandpool/store/dead_letters.hpp>
#include <sandpool/store/task_journal.hpp>
#include "dead_letter_support.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::run;

namespace {

using TempDir = sandpool::testing::StateDir;
using sandpool::testing::open_store;

PoolOptions replay_options(bool fail, std::shared_ptr<DeadLetterStore> store) {
  return sandpool::testing::configurable("images", fail, std::move(store));
}

// Dead-letters `n` tasks through a failing pool; returns their letters, as stored.
std::vector<DeadLetter> dead_letter(const std::shared_ptr<DeadLetterStore>& store, int n) {
  {
    auto failing = make_pool(replay_options(true, store));
    for (int i = 0; i < n; ++i) {
      SubmitOptions so;
      so.priority = i;
      REQUIRE(run(*failing, "configurable", "payload " + std::to_string(i), so).state ==
              TaskState::kDeadLettered);
    }
  }
  REQUIRE(store->flush(kPatience));
  auto listed = store->list({}, DeadLetterPage{1000, std::nullopt});
  REQUIRE(listed);
  REQUIRE(listed->letters.size() == static_cast<std::size_t>(n));
  return listed->letters;
}

}  // namespace

TEST_CASE("two replays of one letter at once: one task, one success, the other not_found") {
  // Without a journal the letter is claimed, then submitted; with one, the letter goes and the
  // task is journaled open in one transaction, where the loser finds the task open and its
  // letter gone: not_found as well (not "open already", which replay_matching counts failed).
  const bool journaled = GENERATE(false, true);
  INFO("journaled: " << journaled);
  TempDir dir;
  DeadLetterStoreOptions o;
  if (journaled) o.journal = TaskJournalOptions{};
  auto store = open_store(dir.path, o);
  const int kLetters = 20;  // each a fresh race: before the claim, most raced into two tasks
  const std::vector<DeadLetter> letters = dead_letter(store, kLetters);
  auto pool = make_pool(replay_options(false, store));
  int ok = 0, not_found = 0;
  for (const DeadLetter& letter : letters) {
    std::latch start(2);
    auto replay = [&] {
      start.arrive_and_wait();
      return pool->replay(letter.letter_id);
    };
    auto a = std::async(std::launch::async, replay);
    auto b = std::async(std::launch::async, replay);
    for (Result<Ticket> r : {a.get(), b.get()}) {
      if (r) {
        ++ok;
        REQUIRE(r->wait_for(kPatience));
        CHECK(r->wait().id == letter.task.id);
      } else {
        CHECK(r.status().code() == Code::kNotFound);
        ++not_found;
      }
    }
  }
  CHECK(ok == kLetters);
  CHECK(not_found == kLetters);
  REQUIRE(pool->wait_idle_for(kPatience));
  CHECK(pool->stats().completed == static_cast<std::uint64_t>(kLetters));
  CHECK(store->list({}, {})->letters.empty());
}

TEST_CASE("a replay its pool refuses leaves the letter in the store as it was") {
  TempDir dir;
  auto store = open_store(dir.path);
  const DeadLetter before = dead_letter(store, 1).front();
  auto pool = make_pool(replay_options(false, store));
  pool->drain();
  auto refused = pool->replay(before.letter_id);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kClosed);
  auto after = store->get(before.letter_id);
  REQUIRE(after);
  CHECK(after->letter_id == before.letter_id);
  CHECK(after->task.id == before.task.id);
  CHECK(after->payload == before.payload);
  CHECK(after->options.priority == before.options.priority);
  CHECK(after->dead_lettered_ms == before.dead_lettered_ms);
  CHECK(after->task.error == before.task.error);
  REQUIRE(after->task.history.size() == before.task.history.size());
  CHECK(after->task.history[0].error == before.task.history[0].error);

  pool->resume();  // and it replays later
  auto t = pool->replay(before.letter_id);
  REQUIRE(t);
  REQUIRE(t->wait_for(kPatience));
  CHECK(t->wait().state == TaskState::kCompleted);
}

TEST_CASE("a replay runs the callbacks its replayer gives the task") {
  TempDir dir;
  auto store = open_store(dir.path);
  const std::vector<DeadLetter> letters = dead_letter(store, 3);
  auto pool = make_pool(replay_options(false, store));
  std::promise<TaskResult> one;
  TaskCallbacks cb;
  cb.on_done = [&one](const TaskResult& r) { one.set_value(r); };
  auto t = pool->replay(letters[0].letter_id, cb);
  REQUIRE(t);
  auto ended = one.get_future();
  REQUIRE(ended.wait_for(kPatience) == std::future_status::ready);
  const TaskResult r = ended.get();
  CHECK(r.id == letters[0].task.id);
  CHECK(r.state == TaskState::kCompleted);

  std::atomic<int> done{0};
  TaskCallbacks each;
  each.on_done = [&done](const TaskResult&) { ++done; };
  auto report = pool->replay_matching({}, each);
  REQUIRE(report);
  CHECK(report->tickets.size() == 2);
  REQUIRE(pool->wait_idle_for(kPatience));
  CHECK(done.load() == 2);
}

TEST_CASE("a dead letter keeps its task's tenant, and its replay runs as that tenant") {
  TempDir dir;
  auto store = open_store(dir.path);
  {
    auto failing = make_pool(replay_options(true, store));
    SubmitOptions so;
    so.tenant = "acme";
    so.key = "user-7";
    const TaskResult r = run(*failing, "configurable", "for acme", so);
    REQUIRE(r.state == TaskState::kDeadLettered);
    CHECK(r.tenant == "acme");
  }
  REQUIRE(store->flush(kPatience));
  auto listed = store->list({}, DeadLetterPage{10, std::nullopt});
  REQUIRE(listed);
  REQUIRE(listed->letters.size() == 1);
  const DeadLetter& letter = listed->letters.front();
  CHECK(letter.options.tenant == "acme");
  CHECK(letter.task.tenant == "acme");
  CHECK(letter.options.key == "user-7");
  auto pool = make_pool(replay_options(false, store));
  auto replayed = pool->replay(letter.letter_id);
  REQUIRE(replayed);
  CHECK(replayed->options().tenant == "acme");
  REQUIRE(replayed->wait_for(kPatience));
  const TaskResult done = replayed->wait();
  CHECK(done.state == TaskState::kCompleted);
  CHECK(done.tenant == "acme");
}
