// The Lua scripts of a Redis pool (redis/src/redis/lua/, task_stream_scripts.hpp) against a
// real redis-server: each one compiles, and names the consumer group only through GROUP,
// TaskStream::kGroup; the batched ones keep the fences of the per-task ones.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <sandpool/redis/task_stream.hpp>
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
      &lua::Submit::kScript,   &lua::SubmitBatch::kScript, &lua::ClaimSlot::kScript,
      &lua::Attempt::kScript,  &lua::FinishBatch::kScript, &lua::TrimFinished::kScript,
      &lua::Beat::kScript,     &lua::Discard::kScript,     &lua::Release::kScript,
      &lua::Refused::kScript,  &lua::Cancel::kScript,      &lua::Touch::kScript,
      &lua::Retry::kScript,    &lua::MoveDue::kScript,     &lua::Read::kScript,
      &lua::Take::kScript,     &lua::ClaimIdle::kScript,   &lua::TakeTokens::kScript,
      &lua::Throttle::kScript, &lua::Letters::kScript};
  return all;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Cluster {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  redis::TaskStream stream;  // keeping `keep` finished tasks
  explicit Cluster(std::uint64_t keep = 1000) : stream("sp:", "echo", keep) {
    REQUIRE(stream.ensure_group(c).is_ok());
  }

  std::vector<std::uint64_t> submit(int n) {
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      redis::StreamTask t;
      t.type = "echo";
      t.payload = std::to_string(i);
      ids.push_back(stream.submit(c, t, 1000).value());
    }
    return ids;
  }
  std::int64_t integer(std::initializer_list<std::string_view> command) {
    auto r = c.command(command);
    REQUIRE(r.is_ok());
    return r->integer;
  }
  std::string state_of(std::uint64_t id) { return stream.task(c, id).value().state; }
};

redis::TaskStream::EndWrite completed(const StreamEntry& e, const std::string& result,
                                      std::int64_t now_ms) {
  redis::TaskStream::EndWrite w;
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

TEST_CASE("the scripts name the consumer group once, from TaskStream's constant") {
  const std::string group = std::string("'") + redis::TaskStream::kGroup + "'";
  for (const redis::Script* s : every_script()) {
    INFO(s->name);
    CHECK(s->source.rfind("local GROUP = " + group + "\n", 0) == 0);
    CHECK(count_of(s->source, group) == 1);
    CHECK(count_of(s->source, "\"" + std::string(redis::TaskStream::kGroup) + "\"") == 0);
  }
}

TEST_CASE(
    "a stale node's batch of ends writes its own tasks and leaves alone the one another node "
    "claimed and finished") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(3);
  auto held = w.stream.read(w.c, "node-a", 3, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 3);
  REQUIRE(w.stream.take(w.c, "node-a", held).is_ok());
  // node-a stalls; node-b claims everything idle (node-a has no heartbeat key) and ends the
  // second task, handing the other two back to the stream's pending list as its own.
  auto claimed = w.stream.claim_idle(w.c, "node-b", std::chrono::milliseconds(0), 10).value();
  REQUIRE(claimed.size() == 3);
  const auto b_end = w.stream.end_all(w.c, "node-b", {completed(claimed[1], "b", 5)});
  REQUIRE(b_end.value() == std::vector<Fenced>{Fenced::kDone});
  // node-a wakes and writes its whole batch: every end is fenced now, and nothing it says
  // reaches the tasks.
  const auto a_ends = w.stream
                          .end_all(w.c, "node-a",
                                   {completed(held[0], "a", 9), completed(held[1], "a", 9),
                                    completed(held[2], "a", 9)})
                          .value();
  CHECK(a_ends == std::vector<Fenced>(3, Fenced::kNotYours));
  CHECK(w.stream.task(w.c, ids[1]).value().result == "b");
  CHECK(w.stream.task(w.c, ids[1]).value().node == "node-b");
  CHECK(w.state_of(ids[0]) == "running");
  CHECK(w.integer({"LLEN", "sp:end:" + std::to_string(ids[1])}) == 1);
  CHECK(w.integer({"LLEN", "sp:task:" + std::to_string(ids[1]) + ":attempts"}) == 1);
  // node-b's batch of the other two ends them once, in one call.
  const auto b_rest =
      w.stream
          .end_all(w.c, "node-b", {completed(claimed[0], "b", 6), completed(claimed[2], "b", 6)})
          .value();
  CHECK(b_rest == std::vector<Fenced>(2, Fenced::kDone));
  for (const std::uint64_t id : ids) {
    CHECK(w.state_of(id) == "completed");
    CHECK(w.integer({"LLEN", "sp:end:" + std::to_string(id)}) == 1);
  }
  CHECK(w.integer({"XLEN", w.stream.stream_key()}) == 0);
  CHECK(w.integer({"ZCARD", "sp:echo:done"}) == 3);
}

TEST_CASE("an entry twice in one batch of ends is ended once") {
  Cluster w;
  const std::vector<std::uint64_t> ids = w.submit(2);
  auto held = w.stream.read(w.c, "node-a", 2, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == 2);
  const auto answers = w.stream
                           .end_all(w.c, "node-a",
                                    {completed(held[0], "first", 5), completed(held[1], "x", 5),
                                     completed(held[0], "second", 6)})
                           .value();
  CHECK(answers == std::vector<Fenced>{Fenced::kDone, Fenced::kDone, Fenced::kNotYours});
  CHECK(w.stream.task(w.c, ids[0]).value().result == "first");
  CHECK(w.integer({"LLEN", "sp:end:" + std::to_string(ids[0])}) == 1);
  CHECK(w.integer({"LLEN", "sp:task:" + std::to_string(ids[0]) + ":attempts"}) == 1);
}

TEST_CASE(
    "a batch of ends refuses the entries another node claimed among them, also when the node "
    "holds many more") {
  Cluster w;
  const int held_count = GENERATE(10, 300);
  INFO("held " << held_count);
  w.submit(held_count);
  auto held =
      w.stream
          .read(w.c, "node-a", static_cast<std::size_t>(held_count), std::chrono::milliseconds(0))
          .value();
  REQUIRE(held.size() == static_cast<std::size_t>(held_count));
  // node-b takes the entries at 1 and 3 (XCLAIM, as claim_idle does), among node-a's.
  for (const std::size_t k : {1, 3}) {
    REQUIRE(w.c.command({"XCLAIM", w.stream.stream_key(), redis::TaskStream::kGroup, "node-b", "0",
                         held[k].entry_id})
                .is_ok());
  }
  // node-a ends the first five and the last it holds, in one batch.
  const std::vector<std::size_t> ending = {0, 1, 2, 3, 4, held.size() - 1};
  std::vector<redis::TaskStream::EndWrite> ends;
  for (const std::size_t k : ending) ends.push_back(completed(held[k], "a", 7));
  const auto answers = w.stream.end_all(w.c, "node-a", ends).value();
  CHECK(answers == std::vector<Fenced>{Fenced::kDone, Fenced::kNotYours, Fenced::kDone,
                                       Fenced::kNotYours, Fenced::kDone, Fenced::kDone});
  CHECK(w.state_of(held[1].task_id) == "running");
  CHECK(w.state_of(held[3].task_id) == "running");
  CHECK(w.state_of(held[2].task_id) == "completed");
  CHECK(w.state_of(held.back().task_id) == "completed");
  // Still node-b's, still pending: node-a acknowledged only its own.
  auto pending = w.c.command({"XPENDING", w.stream.stream_key(), redis::TaskStream::kGroup});
  REQUIRE(pending.is_ok());
  CHECK(pending->elements[0].integer == held_count - 4);
}

TEST_CASE("a batch of more ends than one script takes is split, and keeps the finished bound") {
  Cluster w(500);
  const std::size_t n = redis::lua::FinishBatch::kMaxEnds + 100;
  w.submit(static_cast<int>(n));
  auto held = w.stream.read(w.c, "node-a", n, std::chrono::milliseconds(0)).value();
  REQUIRE(held.size() == n);
  std::vector<redis::TaskStream::EndWrite> ends;
  for (std::size_t i = 0; i < n; ++i) {
    ends.push_back(completed(held[i], "r", static_cast<std::int64_t>(i)));
  }
  const auto answers = w.stream.end_all(w.c, "node-a", ends).value();
  CHECK(answers == std::vector<Fenced>(n, Fenced::kDone));
  CHECK(w.integer({"ZCARD", "sp:echo:done"}) == 500);  // the stream's max_finished
  CHECK(w.integer({"XLEN", w.stream.stream_key()}) == 0);
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
  REQUIRE(w.c.command({"XADD", w.stream.stream_key(), "*", "id", forged, "type", "echo", "priority",
                       "99999999999"})
              .is_ok());
  auto got = w.stream.read(w.c, "node-a", 10, std::chrono::milliseconds(0)).value();
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(got[i].malformed.empty());
    CHECK(got[i].attempts == 0);
    const auto t = w.stream.task(w.c, ids[i]).value();
    CHECK(t.state == "running");
    CHECK(t.node == "node-a");
  }
  CHECK_FALSE(got[2].malformed.empty());
  CHECK(w.state_of(std::stoull(forged)) == "completed");
}
