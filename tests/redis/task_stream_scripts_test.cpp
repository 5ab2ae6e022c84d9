// The Lua scripts of a Redis pool (redis/src/redis/lua/, task_stream_scripts.hpp) against a
// real redis-server: each one compiles, and names the consumer group only through GROUP,
// PoolKeys::kGroup; the batched ones keep the fences of the per-task ones.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis/batch_scripts.hpp"
#include "redis/task_stream_scripts.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::redis::Fenced;
using sandpool::redis::StreamEntry;
using sandpool::testing::RedisServer;

namespace {

const std::vector<const redis::Script*>& every_script() {
  namespace lua = redis::lua;
  static const std::vector<const redis::Script*> all = {
      &lua::Submit::kScript,    &lua::SubmitBatch::kScript, &lua::ClaimSlot::kScript,
      &lua::Attempt::kScript,   &lua::FinishBatch::kScript, &lua::TrimFinished::kScript,
      &lua::Beat::kScript,      &lua::Discard::kScript,     &lua::Release::kScript,
      &lua::Refused::kScript,   &lua::Cancel::kScript,      &lua::Touch::kScript,
      &lua::Retry::kScript,     &lua::MoveDue::kScript,     &lua::Take::kScript,
      &lua::ClaimIdle::kScript, &lua::TakeTokens::kScript,  &lua::Throttle::kScript,
      &lua::Letters::kScript,   &lua::AwaitEnd::kScript,    &lua::BatchSubmit::kScript,
      &lua::BatchTake::kScript, &lua::BatchEnd::kScript,    &lua::BatchLookup::kScript};
  return all;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Cluster : testing::ScriptPool {
  using ScriptPool::ScriptPool;
  std::string state_of(std::uint64_t id) { return stream.producer.task(c, id).value().state; }
};

redis::TaskConsumer::EndWrite completed(const StreamEntry& e, const std::string& result,
                                        std::int64_t now_ms) {
  redis::TaskConsumer::EndWrite w;
  w.entry = &e;
  w.state = "completed";
  w.result = result;
  w.now_ms = now_ms;
  w.attempts = {"{\"n\":1}"};
  return w;
}

}  // namespace

TEST_CASE("every script of a redis pool compiles on a real redis-server") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint());
  REQUIRE(c.is_ok());
  for (const redis::Script* s : every_script()) {
    INFO(s->name);
    auto sha = c->load(*s);
    CHECK(sha.is_ok());
    if (sha) CHECK(sha->size() == 40);
  }
}

TEST_CASE("the scripts name the consumer group once, from PoolKeys' constant") {
  const std::string group = std::string("'") + redis::PoolKeys::kGroup + "'";
  for (const redis::Script* s : every_script()) {
    INFO(s->name);
    CHECK(s->source.rfind("local GROUP = " + group + "\n", 0) == 0);
    CHECK(count_of(s->source, group) == 1);
    CHECK(count_of(s->source, "\"" + std::string(redis::PoolKeys::kGroup) + "\"") == 0);
  }
}

TEST_CASE(
    "a stale node's batch of ends writes its own tasks and leaves alone the one another node "
    "claimed and finished") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(3);
  auto held = w.stream.consumer.read(w.c, "node-a", 3, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 3);
  REQUIRE(w.stream.consumer.take(w.c, "node-a", held).is_ok());
  // node-a stalls; node-b claims everything idle (node-a has no heartbeat key) and ends the
  // second task, handing the other two back to the stream's pending list as its own.
  auto claimed =
      w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(0), 10).value();
  REQUIRE(claimed.size() == 3);
  // As the beat does: a claimed entry is taken before it runs (take.lua writes `node`; an
  // end does not write it again).
  REQUIRE(w.stream.consumer.take(w.c, "node-b", claimed).is_ok());
  const auto b_end = w.stream.consumer.end_all(w.c, "node-b", {completed(claimed[1], "b", 5)});
  REQUIRE(b_end.value() == std::vector<Fenced>{Fenced::kDone});
  // node-a wakes and writes its whole batch: every end is fenced now, and nothing it says
  // reaches the tasks.
  const auto a_ends = w.stream.consumer
                          .end_all(w.c, "node-a",
                                   {completed(held[0], "a", 9), completed(held[1], "a", 9),
                                    completed(held[2], "a", 9)})
                          .value();
  CHECK(a_ends == std::vector<Fenced>(3, Fenced::kNotYours));
  CHECK(w.stream.producer.task(w.c, ids[1]).value().result == "b");
  CHECK(w.stream.producer.task(w.c, ids[1]).value().node == "node-b");
  CHECK(w.state_of(ids[0]) == "running");
  CHECK(w.stream.producer.task(w.c, ids[1]).value().ends == 1);
  CHECK(w.stream.producer.task(w.c, ids[1]).value().history.size() == 1);
  // node-b's batch of the other two ends them once, in one call.
  const auto b_rest =
      w.stream.consumer
          .end_all(w.c, "node-b", {completed(claimed[0], "b", 6), completed(claimed[2], "b", 6)})
          .value();
  CHECK(b_rest == std::vector<Fenced>(2, Fenced::kDone));
  for (const std::uint64_t id : ids) {
    CHECK(w.state_of(id) == "completed");
    CHECK(w.stream.producer.task(w.c, id).value().ends == 1);
  }
  CHECK(w.integer({"XLEN", w.stream.keys.stream_key()}) == 0);
  CHECK(w.integer({"ZCARD", "sp:echo:done"}) == 3);
}

TEST_CASE("an entry twice in one batch of ends is ended once") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  auto held = w.stream.consumer.read(w.c, "node-a", 2, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 2);
  const auto answers = w.stream.consumer
                           .end_all(w.c, "node-a",
                                    {completed(held[0], "first", 5), completed(held[1], "x", 5),
                                     completed(held[0], "second", 6)})
                           .value();
  CHECK(answers == std::vector<Fenced>{Fenced::kDone, Fenced::kDone, Fenced::kNotYours});
  CHECK(w.stream.producer.task(w.c, ids[0]).value().result == "first");
  CHECK(w.stream.producer.task(w.c, ids[0]).value().ends == 1);
  CHECK(w.stream.producer.task(w.c, ids[0]).value().history.size() == 1);
}

TEST_CASE(
    "a batch of ends refuses the entries another node claimed among them, also when the node "
    "holds many more") {
  Cluster w;
  const int held_count = GENERATE(10, 300);
  INFO("held " << held_count);
  w.submit(held_count);
  auto held =
      w.stream.consumer
          .read(w.c, "node-a", static_cast<std::size_t>(held_count), std::chrono::milliseconds(0))
          .value();
  REQUIRE(held.size() == static_cast<std::size_t>(held_count));
  // node-b takes the entries at 1 and 3 (XCLAIM, as claim_idle does), among node-a's.
  for (const std::size_t k : {1, 3}) {
    REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(), redis::PoolKeys::kGroup, "node-b",
                         "0", held[k].entry_id})
                .is_ok());
  }
  // node-a ends the first five and the last it holds, in one batch.
  const std::vector<std::size_t> ending = {0, 1, 2, 3, 4, held.size() - 1};
  std::vector<redis::TaskConsumer::EndWrite> ends;
  for (const std::size_t k : ending) ends.push_back(completed(held[k], "a", 7));
  const auto answers = w.stream.consumer.end_all(w.c, "node-a", ends).value();
  CHECK(answers == std::vector<Fenced>{Fenced::kDone, Fenced::kNotYours, Fenced::kDone,
                                       Fenced::kNotYours, Fenced::kDone, Fenced::kDone});
  CHECK(w.state_of(held[1].task_id) == "running");
  CHECK(w.state_of(held[3].task_id) == "running");
  CHECK(w.state_of(held[2].task_id) == "completed");
  CHECK(w.state_of(held.back().task_id) == "completed");
  // Still node-b's, still pending: node-a acknowledged only its own.
  auto pending = w.c.command({"XPENDING", w.stream.keys.stream_key(), redis::PoolKeys::kGroup});
  REQUIRE(pending.is_ok());
  CHECK(pending->elements[0].integer == held_count - 4);
}

TEST_CASE("a batch of more ends than one script takes is split, and keeps the finished bound") {
  Cluster w(500);
  const std::size_t n = redis::lua::FinishBatch::kMaxEnds + 100;
  w.submit(static_cast<int>(n));
  auto held = w.stream.consumer.read(w.c, "node-a", n, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == n);
  std::vector<redis::TaskConsumer::EndWrite> ends;
  for (std::size_t i = 0; i < n; ++i) {
    ends.push_back(completed(held[i], "r", static_cast<std::int64_t>(i)));
  }
  const auto answers = w.stream.consumer.end_all(w.c, "node-a", ends).value();
  CHECK(answers == std::vector<Fenced>(n, Fenced::kDone));
  CHECK(w.integer({"ZCARD", "sp:echo:done"}) == 500);  // the stream's max_finished
  CHECK(w.integer({"XLEN", w.stream.keys.stream_key()}) == 0);
  // The oldest evicted whole: no hash left behind.
  CHECK(w.integer({"EXISTS", "sp:task:" + std::to_string(held[0].task_id)}) == 0);
  CHECK(w.integer({"EXISTS", "sp:task:" + std::to_string(held[n - 1].task_id)}) == 1);
}

TEST_CASE(
    "a read takes its tasks in the same script, and leaves the hash of an entry that is not a "
    "task untouched") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  // A hostile entry: a task's id and type, and a priority no task has.
  const std::string forged = std::to_string(ids[1] + 1000);
  REQUIRE(
      w.c.command({"HSET", "sp:task:" + forged, "state", "completed", "attempts", "1"})->integer ==
      2);
  REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(), "*", "id", forged, "type", "echo",
                       "priority", "99999999999"})
              .is_ok());
  auto got = w.stream.consumer.read(w.c, "node-a", 10, std::chrono::milliseconds(0)).value();
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(got[i].malformed.empty());
    CHECK(got[i].attempts == 0);
    const auto t = w.stream.producer.task(w.c, ids[i]).value();
    CHECK(t.state == "running");
    CHECK(t.node == "node-a");
  }
  CHECK_FALSE(got[2].malformed.empty());
  CHECK(w.state_of(std::stoull(forged)) == "completed");
}

TEST_CASE(
    "an end is told to the waiters registered before it, at once to those after it, and to "
    "no list when no one waits") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(3);
  auto held = w.stream.consumer.read(w.c, "node-a", 3, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 3);
  const std::chrono::milliseconds brief(50);
  // Task 0 is awaited while it runs: nothing yet; its end then wakes the waiter.
  CHECK(w.stream.producer.await_end(w.c, ids[0], brief).value() == std::nullopt);
  REQUIRE(w.stream.consumer
              .end_all(w.c, "node-a", {completed(held[0], "r", 5), completed(held[1], "r", 5)})
              .value() == std::vector<Fenced>(2, Fenced::kDone));
  CHECK(w.integer({"LLEN", "sp:end:" + std::to_string(ids[0])}) == 1);
  CHECK(w.stream.producer.await_end(w.c, ids[0], brief).value() ==
        std::optional<std::string>("completed"));
  // Task 1 ended unawaited: no list was written for it; a waiter after the end is told at once.
  CHECK(w.integer({"EXISTS", "sp:end:" + std::to_string(ids[1])}) == 0);
  CHECK(w.stream.producer.await_end(w.c, ids[1], std::chrono::milliseconds(5000)).value() ==
        std::optional<std::string>("completed"));
  // Each counted once in its hash; an unknown task is not awaited (and gets no hash).
  CHECK(w.stream.producer.task(w.c, ids[0]).value().ends == 1);
  CHECK(w.stream.producer.task(w.c, ids[1]).value().ends == 1);
  CHECK(w.stream.producer.task(w.c, ids[2]).value().ends == 0);
  CHECK(w.stream.producer.await_end(w.c, ids[2] + 100, brief).status().code() == Code::kNotFound);
  CHECK(w.integer({"EXISTS", "sp:task:" + std::to_string(ids[2] + 100)}) == 0);
}

TEST_CASE("a waiter blocked on a task is woken by its end on another connection") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(1);
  auto held = w.stream.consumer.read(w.c, "node-a", 1, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 1);
  auto waiter = redis::Connection::open(w.server.endpoint()).value();
  std::optional<std::string> told;
  bool answered = false;
  std::jthread t([&] {
    auto r = w.stream.producer.await_end(waiter, ids[0], std::chrono::milliseconds(1900));
    answered = r.is_ok();
    if (r) told = *r;
  });
  // Ends once the waiter's registration is in the hash (it goes out with its BLPOP).
  for (int i = 0;
       i < 2000 && w.integer({"HEXISTS", "sp:task:" + std::to_string(ids[0]), "await"}) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {completed(held[0], "r", 5)}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  t.join();
  CHECK(answered);
  CHECK(told == std::optional<std::string>("completed"));
}

TEST_CASE(
    "a round of waits registers the new ones, names the unknown, and ends with the first end or "
    "a wake") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  auto held = w.stream.consumer.read(w.c, "node-a", 2, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 2);
  const std::string wake = "sp:wake:test";
  const std::uint64_t unknown = ids[1] + 100;
  // Nothing ended: the round registers both and the unknown one, and times out.
  auto r = w.stream.producer
               .await_any(w.c, {ids[0], ids[1], unknown}, {ids[0], ids[1], unknown}, wake,
                          std::chrono::milliseconds(50))
               .value();
  CHECK(r.unknown == std::vector<std::uint64_t>{unknown});
  CHECK(r.ended == 0);
  CHECK_FALSE(r.woken);
  CHECK(w.integer({"HEXISTS", "sp:task:" + std::to_string(ids[1]), "await"}) == 1);
  // A push on the wake list ends the next round at once.
  REQUIRE(w.integer({"RPUSH", wake, "1"}) == 1);
  r = w.stream.producer.await_any(w.c, {}, {ids[0], ids[1]}, wake, std::chrono::seconds(1)).value();
  CHECK(r.woken);
  CHECK(r.ended == 0);
  // Task 1's end (registered already) ends the next one with its state.
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {completed(held[1], "r", 5)}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  r = w.stream.producer.await_any(w.c, {}, {ids[0], ids[1]}, wake, std::chrono::seconds(1)).value();
  CHECK(r.ended == ids[1]);
  CHECK(r.state == "completed");
  CHECK_FALSE(r.woken);
  CHECK(w.stream.producer.await_any(w.c, {}, {ids[0]}, wake, std::chrono::milliseconds(0))
            .status()
            .code() == Code::kInvalidArgument);
}

TEST_CASE("a round of waits on one task brings its account with its end, and stays in step") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  auto held = w.stream.consumer.read(w.c, "node-a", 2, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 2);
  const std::string wake = "sp:wake:one";
  // Nothing ended: no account (the reads behind the BLPOP are read, and dropped).
  auto r = w.stream.producer.await_any(w.c, {ids[0]}, {ids[0]}, wake, std::chrono::milliseconds(50))
               .value();
  CHECK(r.ended == 0);
  CHECK_FALSE(r.account.has_value());
  REQUIRE(w.integer({"RPUSH", wake, "1"}) == 1);  // the connection answers in step
  r = w.stream.producer.await_any(w.c, {}, {ids[0]}, wake, std::chrono::seconds(1)).value();
  CHECK(r.woken);
  CHECK_FALSE(r.account.has_value());
  // Its end: the round answers the account as task() reads it, the attempts included.
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {completed(held[0], "r", 5)}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  r = w.stream.producer.await_any(w.c, {}, {ids[0]}, wake, std::chrono::seconds(1)).value();
  CHECK(r.ended == ids[0]);
  REQUIRE(r.account.has_value());
  const redis::StoredTask stored = w.stream.producer.task(w.c, ids[0]).value();
  CHECK(r.account->id == ids[0]);
  CHECK(r.account->state == "completed");
  CHECK(r.account->result == "r");
  CHECK(r.account->history == stored.history);
  CHECK_FALSE(r.account->history.empty());
  // Two awaited: which ends is not known before, and no account is read.
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {completed(held[1], "s", 5)}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  r = w.stream.producer.await_any(w.c, {ids[1]}, {ids[0], ids[1]}, wake, std::chrono::seconds(1))
          .value();
  CHECK(r.ended == ids[1]);
  CHECK_FALSE(r.account.has_value());
  CHECK(w.integer({"RPUSH", wake, "1"}) == 1);
}

TEST_CASE("a cancel ends a waited task once, and tells its waiter") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  CHECK(w.stream.producer.await_end(w.c, ids[0], std::chrono::milliseconds(10)).value() ==
        std::nullopt);
  REQUIRE(w.stream.producer.cancel(w.c, ids[0], 7).value().state == "cancelled");
  REQUIRE(w.stream.producer.cancel(w.c, ids[1], 7).value().state == "cancelled");
  CHECK(w.stream.producer.task(w.c, ids[0]).value().ends == 1);
  CHECK(w.stream.producer.task(w.c, ids[1]).value().ends == 1);
  CHECK(w.integer({"LLEN", "sp:end:" + std::to_string(ids[0])}) == 1);
  CHECK(w.integer({"EXISTS", "sp:end:" + std::to_string(ids[1])}) == 0);
  CHECK(w.stream.producer.cancel(w.c, ids[0], 8).value().asked == false);  // ended: nothing more
  CHECK(w.stream.producer.task(w.c, ids[0]).value().ends == 1);
}

TEST_CASE(
    "a batch of ends past the finished bound evicts the oldest with their idempotency keys and "
    "bytes") {
  Cluster w(2);
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    redis::StreamTask t;
    t.type = "echo";
    t.payload = "x";
    t.options.idempotency_key = "k" + std::to_string(i);
    ids.push_back(w.stream.producer.submit(w.c, t, 1000).value().id);
  }
  auto held = w.stream.consumer.read(w.c, "node-a", 5, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 5);
  std::vector<redis::TaskConsumer::EndWrite> ends;
  for (std::size_t i = 0; i < 5; ++i) {
    ends.push_back(completed(held[i], std::string(i + 1, 'r'), static_cast<std::int64_t>(10 + i)));
  }
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", ends).value() ==
          std::vector<Fenced>(5, Fenced::kDone));
  for (std::size_t i = 0; i < 5; ++i) {
    INFO("task " << i);
    const std::string h = "sp:task:" + std::to_string(ids[i]);
    const bool kept = i >= 3;
    CHECK(w.integer({"EXISTS", h}) == (kept ? 1 : 0));
    CHECK(w.integer({"EXISTS", "sp:idem:k" + std::to_string(i)}) == (kept ? 1 : 0));
  }
  // The bytes of the two kept results, 4 and 5.
  CHECK(w.c.command({"GET", "sp:echo:done:bytes"})->str == "9");
}

TEST_CASE(
    "a batch of ends deletes its entries below and above the oldest one still pending, and no "
    "other") {
  Cluster w;
  w.submit(6);
  auto held = w.stream.consumer.read(w.c, "node-a", 5, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 5);
  const auto ids_in_stream = [&] {
    std::vector<std::string> out;
    auto r = w.c.command({"XRANGE", w.stream.keys.stream_key(), "-", "+"});
    REQUIRE(r.is_ok());
    for (const redis::Reply& e : r->elements) out.push_back(e.elements[0].str);
    return out;
  };
  // Entry 2 stays pending (the oldest one after this batch): 0 and 1 lie below it, 3 above;
  // 4 stays pending too, and the sixth was never read.
  auto ended = w.stream.consumer
                   .end_all(w.c, "node-a",
                            {completed(held[0], "r", 5), completed(held[3], "r", 5),
                             completed(held[1], "r", 5)})
                   .value();
  CHECK(ended == std::vector<Fenced>(3, Fenced::kDone));
  auto left = ids_in_stream();
  REQUIRE(left.size() == 3);
  CHECK(left[0] == held[2].entry_id);
  CHECK(left[1] == held[4].entry_id);
  // The unread one is still read, and the held ones still end.
  auto sixth = w.stream.consumer.read(w.c, "node-b", 5, std::chrono::milliseconds(0)).value();
  REQUIRE(sixth.size() == 1);
  CHECK(sixth[0].entry_id == left[2]);
  ended = w.stream.consumer
              .end_all(w.c, "node-a", {completed(held[4], "r", 6), completed(held[2], "r", 6)})
              .value();
  CHECK(ended == std::vector<Fenced>(2, Fenced::kDone));
  CHECK(ids_in_stream() == std::vector<std::string>{sixth[0].entry_id});
  CHECK(w.stream.consumer.end_all(w.c, "node-b", {completed(sixth[0], "r", 7)}).value() ==
        std::vector<Fenced>{Fenced::kDone});
  CHECK(ids_in_stream().empty());
}

TEST_CASE("a read tells each task's attempts so far: none when new, the count after a retry") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  auto first = w.stream.consumer.read(w.c, "node-a", 2, std::chrono::milliseconds(0)).value();
  REQUIRE(first.size() == 2);
  CHECK(first[0].attempts == 0);
  CHECK(first[1].attempts == 0);
  // Two attempts of the first fail; it waits out a backoff, then another node reads it.
  redis::TaskConsumer::Backoff b;
  b.jitter = 0;
  REQUIRE(w.stream.consumer.retry(w.c, first[0], "node-a", {"a1", "a2"}, 5, b, 1000).value() ==
          redis::TaskConsumer::Retried::kDeferred);
  REQUIRE(w.stream.upkeep.move_due(w.c, 2000, 10).value() == 1);
  auto again = w.stream.consumer.read(w.c, "node-b", 5, std::chrono::milliseconds(0)).value();
  REQUIRE(again.size() == 1);
  CHECK(again[0].task_id == ids[0]);
  CHECK(again[0].attempts == 2);
  const auto t = w.stream.producer.task(w.c, ids[0]).value();
  CHECK(t.node == "node-b");
  CHECK(t.state == "running");
}

TEST_CASE(
    "a batch of ends over three bands, out of order, fences and deletes each entry by its own "
    "band's range") {
  Cluster w;
  // Band 0 by plain XADDs with ids whose sequence numbers differ in length (1-9 below 1-10);
  // bands 1 and -1 by submits.
  for (int seq = 8; seq <= 12; ++seq) {
    REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(0), "1-" + std::to_string(seq), "id",
                         std::to_string(100 + seq), "type", "echo"})
                .is_ok());
  }
  for (const std::int32_t priority : {5, 5, -5, -5}) {
    redis::StreamTask t;
    t.type = "echo";
    t.options.priority = priority;
    REQUIRE(w.stream.producer.submit(w.c, t, 1000).is_ok());
  }
  auto held = w.stream.consumer.read(w.c, "node-a", 9, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 9);
  std::map<std::string, const StreamEntry*> by_entry;
  std::vector<const StreamEntry*> high, low;
  for (const StreamEntry& e : held) {
    if (e.band == 0) by_entry[e.entry_id] = &e;
    if (e.band == 1) high.push_back(&e);
    if (e.band == -1) low.push_back(&e);
  }
  REQUIRE(by_entry.size() == 5);
  REQUIRE(high.size() == 2);
  REQUIRE(low.size() == 2);
  // node-b takes 1-10, inside the batch's range of band 0.
  REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(0), redis::PoolKeys::kGroup, "node-b",
                       "0", "1-10"})
              .is_ok());
  // 1-9 stays pending: the oldest, so 1-8 lies below it and 1-11, 1-12 above.
  const auto answers =
      w.stream.consumer
          .end_all(w.c, "node-a",
                   {completed(*by_entry["1-12"], "r", 5), completed(*high[1], "r", 5),
                    completed(*by_entry["1-11"], "r", 5), completed(*by_entry["1-10"], "r", 5),
                    completed(*low[1], "r", 5), completed(*high[0], "r", 5),
                    completed(*by_entry["1-8"], "r", 5)})
          .value();
  CHECK(answers == std::vector<Fenced>{Fenced::kDone, Fenced::kDone, Fenced::kDone,
                                       Fenced::kNotYours, Fenced::kDone, Fenced::kDone,
                                       Fenced::kDone});
  const auto ids_in = [&](redis::Band band) {
    std::vector<std::string> out;
    auto r = w.c.command({"XRANGE", w.stream.keys.stream_key(band), "-", "+"});
    REQUIRE(r.is_ok());
    for (const redis::Reply& e : r->elements) out.push_back(e.elements[0].str);
    return out;
  };
  CHECK(ids_in(0) == std::vector<std::string>{"1-9", "1-10"});
  CHECK(ids_in(1).empty());
  CHECK(ids_in(-1) == std::vector<std::string>{low[0]->entry_id});
  CHECK(w.state_of(by_entry["1-10"]->task_id) == "running");
  CHECK(w.state_of(by_entry["1-11"]->task_id) == "completed");
  // A completed end writes no empty error or reason, and leaves `node` as the read wrote it.
  const std::string h = "sp:task:" + std::to_string(by_entry["1-11"]->task_id);
  CHECK(w.integer({"HEXISTS", h, "error"}) == 0);
  CHECK(w.integer({"HEXISTS", h, "reason"}) == 0);
  CHECK(w.stream.producer.task(w.c, by_entry["1-11"]->task_id).value().node == "node-a");
}

TEST_CASE(
    "a read leaves each task's hash naming the entry and band it runs from: submitted, "
    "scheduled and moved, handed back, or added by a plain XADD") {
  Cluster w;
  redis::StreamTask urgent;
  urgent.type = "echo";
  urgent.options.priority = 4;
  const std::uint64_t submitted = w.stream.producer.submit(w.c, urgent, 1000).value().id;
  redis::StreamTask later;
  later.type = "echo";
  later.options.priority = -2;
  REQUIRE(later.options.set_not_before_ms(5000));
  const std::uint64_t scheduled = w.stream.producer.submit(w.c, later, 1000).value().id;
  REQUIRE(w.stream.upkeep.move_due(w.c, 6000, 10).value() == 1);
  REQUIRE(
      w.c.command({"XADD", w.stream.keys.stream_key(0), "*", "id", "77", "type", "echo"}).is_ok());
  const auto check_runs_from = [&](const StreamEntry& e, const std::string& node) {
    INFO("task " << e.task_id << " from " << e.entry_id);
    const auto t = w.stream.producer.task(w.c, e.task_id).value();
    CHECK(t.state == "running");
    CHECK(t.node == node);
    CHECK(t.entry_id == e.entry_id);
    // Band 0 may be missing (a submit writes no band 0): it reads as 0.
    const auto band = w.c.command({"HGET", "sp:task:" + std::to_string(e.task_id), "band"});
    REQUIRE(band.is_ok());
    CHECK((band->is_nil() ? std::string("0") : band->str) == std::to_string(e.band));
  };
  auto first = w.stream.consumer.read(w.c, "node-a", 10, std::chrono::milliseconds(0)).value();
  REQUIRE(first.size() == 3);
  CHECK(first[0].task_id == submitted);
  CHECK(first[1].task_id == 77);
  CHECK(first[2].task_id == scheduled);
  for (const StreamEntry& e : first) check_runs_from(e, "node-a");
  // Each handed back (a new entry in its band's stream), then read by another node.
  for (const StreamEntry& e : first) {
    REQUIRE(w.stream.consumer.release(w.c, e, "node-a").value() == Fenced::kDone);
  }
  auto again = w.stream.consumer.read(w.c, "node-b", 10, std::chrono::milliseconds(0)).value();
  REQUIRE(again.size() == 3);
  for (std::size_t i = 0; i < again.size(); ++i) {
    CHECK(again[i].task_id == first[i].task_id);
    CHECK(again[i].entry_id != first[i].entry_id);
    check_runs_from(again[i], "node-b");
  }
}

TEST_CASE(
    "a take of entries read by a plain XREADGROUP refuses the one another node claimed among "
    "them, and an entry given twice, and takes the rest") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(5);
  auto r = w.c.command({"XREADGROUP", "GROUP", redis::PoolKeys::kGroup, "node-a", "COUNT", "5",
                        "STREAMS", w.stream.keys.stream_key(0), ">"});
  REQUIRE(r.is_ok());
  REQUIRE(r->elements.size() == 1);
  const auto& read = r->elements[0].elements[1].elements;
  REQUIRE(read.size() == 5);
  std::vector<StreamEntry> entries;
  for (std::size_t i = 0; i < read.size(); ++i) {
    StreamEntry& e = entries.emplace_back();
    e.entry_id = read[i].elements[0].str;
    e.task_id = ids[i];
    e.task.type = "echo";
  }
  entries.push_back(entries[3]);  // the fourth given twice
  // node-b claims the third, inside node-a's range, before node-a's take.
  REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(), redis::PoolKeys::kGroup, "node-b", "0",
                       entries[2].entry_id})
              .is_ok());
  REQUIRE(w.stream.consumer.take(w.c, "node-a", entries).is_ok());
  REQUIRE(entries.size() == 4);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    CHECK(entries[i].task_id == ids[i < 2 ? i : i + 1]);
    CHECK(w.stream.producer.task(w.c, entries[i].task_id).value().node == "node-a");
    CHECK(w.state_of(entries[i].task_id) == "running");
  }
  CHECK(w.state_of(ids[2]) == "queued");
}
