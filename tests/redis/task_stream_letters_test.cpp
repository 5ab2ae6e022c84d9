// TaskProducer's replay and purge of a pool's dead letters (script `letters`) against a real
// redis-server: what a replay writes back, the filters, the letters it leaves, and a sweep
// that stops at the newest letter there when it began.
#include <catch2/catch.hpp>

#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis_server.hpp"
#include "redis_test_support.hpp"

namespace sandpool::letters_test {

using redis::PoolKeys;
using redis::StreamEntry;
using redis::StreamTask;
using redis::TaskProducer;
using testing::end_one;
using testing::PoolSides;
using testing::RedisServer;

struct LetterWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  PoolSides stream{"sp:", "p"};
  LetterWorld() { REQUIRE(stream.upkeep.ensure_group(c).is_ok()); }

  // A task submitted, run once by node n and dead-lettered (`reason`, at `at_ms`).
  std::uint64_t dead(const std::string& type, const std::string& reason, std::int64_t at_ms,
                     const std::string& idem = "", std::optional<std::int64_t> timeout = {}) {
    StreamTask t;
    t.type = type;
    t.payload = std::string("pay\0load", 8);
    t.options.idempotency_key = idem;
    if (timeout) t.options.timeout = std::chrono::milliseconds(*timeout);
    t.options.priority = 3;
    auto id = stream.producer.submit(c, t, 1000);
    REQUIRE(id);
    auto got = stream.consumer.read(c, "n", 1, std::chrono::milliseconds(0));
    REQUIRE(got);
    REQUIRE(got->size() == 1);
    REQUIRE(
        stream.consumer.record_attempt(c, got->front(), "n", "{\"outcome\":\"error\"}").value() ==
        redis::Fenced::kDone);
    REQUIRE(
        end_one(stream, c, got->front(), "n", "dead_lettered", "", "no", reason, at_ms).value() ==
        redis::Fenced::kDone);
    return id->id;
  }
  std::int64_t integer(const std::vector<std::string>& command) {
    auto r = c.command(command);
    REQUIRE(r);
    return r->integer;
  }
  std::int64_t letters() { return integer({"XLEN", "sp:p:dlq"}); }
  std::string field(std::uint64_t id, const std::string& f) {
    return c.command({"HGET", "sp:task:" + std::to_string(id), f})->str;
  }
};

TaskProducer::LetterMatch task_is(std::uint64_t id) {
  TaskProducer::LetterMatch m;
  m.task_id = id;
  return m;
}

}  // namespace sandpool::letters_test

using namespace sandpool;
using namespace sandpool::letters_test;

TEST_CASE("a replayed letter is its task again: same id and fields, attempts counted anew") {
  LetterWorld w;
  const std::uint64_t id = w.dead("t", "permanent", 5000, "key-1", 2500);
  REQUIRE(w.c.command({"ZSCORE", "sp:p:done", std::to_string(id)})->str == "5000");
  REQUIRE(w.c.command({"GET", "sp:p:done:bytes"})->str == "2");  // its error, "no"
  auto swept = w.stream.producer.replay_letters(w.c, task_is(id), 9000, 60000);
  REQUIRE(swept);
  CHECK(swept->replayed == std::vector<std::uint64_t>{id});
  CHECK(swept->refused == 0);
  CHECK(w.letters() == 0);
  // The hash: queued, no attempts, no end; out of the finished set; the key names it.
  CHECK(w.field(id, "state") == "queued");
  CHECK(w.field(id, "attempts") == "0");
  CHECK(w.field(id, "submitted_ms") == "9000");
  CHECK(w.field(id, "band") == "1");
  for (const char* gone : {"result", "error", "reason", "finished_ms", "node"}) {
    INFO(gone);
    CHECK(w.c.command({"HEXISTS", "sp:task:" + std::to_string(id), gone})->integer == 0);
  }
  CHECK(w.stream.producer.task(w.c, id).value().history.empty());
  CHECK(w.c.command({"ZSCORE", "sp:p:done", std::to_string(id)})->is_nil());
  // Its bytes leave the finished tasks' count with it (else the byte bound drifts).
  CHECK(w.c.command({"GET", "sp:p:done:bytes"})->str == "0");
  CHECK(w.c.command({"HEXISTS", "sp:task:" + std::to_string(id), "bytes"})->integer == 0);
  CHECK(w.c.command({"GET", "sp:idem:key-1"})->str == std::to_string(id));
  // The entry: the task's fields, none of the letter's own; a node reads it whole.
  auto got = w.stream.consumer.read(w.c, "m", 10, std::chrono::milliseconds(0));
  REQUIRE(got);
  REQUIRE(got->size() == 1);
  const StreamEntry& e = got->front();
  CHECK(e.malformed.empty());
  CHECK(e.entry_id == w.field(id, "entry"));
  CHECK(e.task_id == id);
  CHECK(e.task.type == "t");
  CHECK(e.task.payload == std::string("pay\0load", 8));
  CHECK(e.task.options.priority == 3);
  CHECK(e.task.options.timeout == std::chrono::milliseconds(2500));
  CHECK(e.task.options.idempotency_key == "key-1");
  // Priority 3: in the stream of the band above 0.
  auto raw = w.c.command({"XRANGE", w.stream.keys.stream_key(1), e.entry_id, e.entry_id});
  REQUIRE(raw);
  std::set<std::string> names;
  const auto& f = raw->elements.at(0).elements.at(1).elements;
  for (std::size_t i = 0; i < f.size(); i += 2) names.insert(f[i].str);
  CHECK(names == std::set<std::string>{"id", "type", "payload", "priority", "timeout_ms", "idem"});
  CHECK(e.attempts == 0);  // as the node reading it learns
  // The same letter again: gone.
  auto again = w.stream.producer.replay_letters(w.c, task_is(id), 9000, 60000);
  REQUIRE(again);
  CHECK(again->replayed.empty());
}

TEST_CASE("replay and purge take the letters their filter matches, and leave what is not a task") {
  LetterWorld w;
  const std::uint64_t a = w.dead("t", "permanent", 1000);
  const std::uint64_t b = w.dead("t", "retries_exhausted", 2000);
  const std::uint64_t c = w.dead("u", "permanent", 3000, "", 90000);
  REQUIRE(w.c.command({"XADD", "sp:p:dlq", "*", "payload", "x", "reason", "permanent",
                       "dead_lettered_ms", "4000"}));
  TaskProducer::LetterMatch m;
  m.type = "t";
  m.reason = "permanent";
  CHECK(w.stream.producer.purge_letters(w.c, m)->purged == 1);  // a
  CHECK(w.c.command({"HGET", "sp:task:" + std::to_string(a), "state"})->str == "dead_lettered");
  m = {};
  m.from_ms = 2000;
  m.until_ms = 3000;
  auto window = w.stream.producer.replay_letters(w.c, m, 5000, 60000);
  REQUIRE(window);
  CHECK(window->replayed == std::vector<std::uint64_t>{b});
  // c's timeout is over the pool's max_timeout; the last letter has no id or type.
  auto rest = w.stream.producer.replay_letters(w.c, {}, 5000, 60000, 1);
  REQUIRE(rest);
  CHECK(rest->replayed.empty());
  CHECK(rest->refused == 2);
  CHECK_THAT(rest->first_refusal, Catch::Contains("max_timeout"));
  CHECK(w.letters() == 2);
  auto c_now = w.stream.producer.replay_letters(w.c, task_is(c), 5000, 90000);
  REQUIRE(c_now);
  CHECK(c_now->replayed == std::vector<std::uint64_t>{c});
  CHECK(w.stream.producer.purge_letters(w.c, {}, 1)->purged == 1);
  CHECK(w.letters() == 0);
}

TEST_CASE("a replay sweep stops at the newest letter there when it began") {
  // Once the sweep's first chunk is in the stream (after it looked for the newest letter),
  // letters keep coming until it ends, as replayed tasks that die again would. A run whose
  // writer got no turn before the sweep ended proves nothing: run again (a few at most).
  int late_seen = 0;
  for (int run = 0; run < 10 && late_seen == 0; ++run) {
    LetterWorld w;
    std::set<std::uint64_t> first;
    for (int i = 0; i < 200; ++i) first.insert(w.dead("t", "permanent", 1000 + i));
    std::atomic<bool> over{false};
    std::atomic<int> late{0};
    std::thread writer([&] {
      auto c = redis::Connection::open(w.server.endpoint()).value();
      while (!over.load() && c.command({"XLEN", "sp:p:q:1"})->integer == 0) {
      }
      while (!over.load()) {
        const auto id = c.command({"INCR", "sp:ids"})->integer;
        (void)c.command({"XADD", "sp:p:dlq", "*", "id", std::to_string(id), "type", "late",
                         "payload", "", "reason", "permanent", "dead_lettered_ms", "1"});
        late.fetch_add(1);
      }
    });
    auto swept = w.stream.producer.replay_letters(w.c, {}, 5000, 60000, 1);  // one letter per call
    over.store(true);
    writer.join();
    REQUIRE(swept);
    CHECK(std::set<std::uint64_t>(swept->replayed.begin(), swept->replayed.end()) == first);
    CHECK(swept->replayed.size() == first.size());
    CHECK(w.letters() == late.load());
    late_seen = late.load();
  }
  CHECK(late_seen > 0);  // some sweep had letters after its end to pass over
}

TEST_CASE("a replay that redis stops part way answers the tasks it replayed before, and why") {
  LetterWorld w;
  const std::uint64_t a = w.dead("resize", "permanent", 1000);
  // A second letter, of priority -1, whose band's stream is broken: its chunk fails.
  const std::uint64_t b = PoolKeys::kFirstId + 777;
  REQUIRE(
      w.c.command({"XADD", "sp:p:dlq", "*", "id", std::to_string(b), "type", "resize", "payload",
                   "", "priority", "-1", "reason", "permanent", "dead_lettered_ms", "2000"}));
  REQUIRE(w.c.command({"DEL", "sp:p:q:-1"}));
  REQUIRE(w.c.command({"SET", "sp:p:q:-1", "not a stream"}));
  auto swept = w.stream.producer.replay_letters(w.c, {}, 5000, 60000, 1);  // one letter per call
  REQUIRE(swept);
  CHECK(swept->replayed == std::vector<std::uint64_t>{a});
  CHECK_FALSE(swept->stopped.is_ok());
  CHECK_THAT(swept->stopped.message(), Catch::Contains("WRONGTYPE"));
  CHECK(w.field(a, "state") == "queued");
}
