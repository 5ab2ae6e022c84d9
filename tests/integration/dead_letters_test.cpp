// Dead letters through a real Pool into the SQLite store, and back by replay.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>

#include "retry/dead_letter_store.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/sandpool-dlq-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

std::shared_ptr<DeadLetterStore> open_store(const std::string& dir) {
  DeadLetterStoreOptions o;
  o.state_dir = dir;
  auto s = DeadLetterStore::open(o);
  if (!s) FAIL("DeadLetterStore::open: " << s.status().to_string());
  return std::shared_ptr<DeadLetterStore>(std::move(s).value());
}

PoolOptions configurable(const std::string& name, bool fail,
                         std::shared_ptr<DeadLetterStore> store) {
  PoolOptions o = pool_options("echo", 1);
  o.name = name;
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libconfigurable.so";
  o.plugin_config_json = fail ? R"({"fail": true})" : "{}";
  o.dead_letter_store = std::move(store);
  return o;
}

}  // namespace

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
