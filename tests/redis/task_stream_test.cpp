// TaskStream's scripts against a real redis-server (redis_server.hpp): a task's way through
// Redis, the fence that keeps a node that lost its entry from writing, exactly one end.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "redis/task_stream.hpp"
#include "redis_server.hpp"

using namespace sandpool;
using sandpool::redis::Fenced;
using sandpool::redis::StreamEntry;
using sandpool::redis::StreamTask;
using sandpool::testing::RedisServer;

namespace {

struct StreamWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  redis::TaskStream stream{"sp:", "echo", 3};
  StreamWorld() { REQUIRE(stream.ensure_group(c).is_ok()); }

  std::uint64_t submit(const std::string& payload, const std::string& idem = "") {
    StreamTask t;
    t.type = "echo";
    t.payload = payload;
    t.idempotency_key = idem;
    auto id = stream.submit(c, t, 1000);
    REQUIRE(id.is_ok());
    return *id;
  }
  std::vector<StreamEntry> read(const std::string& consumer, std::size_t n) {
    auto got = stream.read(c, consumer, n, std::chrono::milliseconds(0));
    REQUIRE(got.is_ok());
    return std::move(got).value();
  }
  std::int64_t length() { return c.command({"XLEN", stream.stream_key()})->integer; }
};

}  // namespace

TEST_CASE("a task is submitted, read by one node, and finished once") {
  StreamWorld w;
  const std::string payload("bin\0ary", 7);
  const std::uint64_t id = w.submit(payload);
  CHECK(w.stream.task(w.c, id)->state == "queued");
  auto got = w.read("node-a", 10);
  REQUIRE(got.size() == 1);
  CHECK(got[0].task_id == id);
  CHECK(got[0].task.payload == payload);
  CHECK(w.read("node-b", 10).empty());  // the group hands an entry to one consumer
  REQUIRE(w.stream.finish(w.c, got[0], "node-a", "completed", "out", "", "", 2000).value() ==
          Fenced::kDone);
  const auto t = w.stream.task(w.c, id);
  REQUIRE(t.is_ok());
  CHECK(t->state == "completed");
  CHECK(t->result == "out");
  CHECK(t->node == "node-a");
  CHECK(t->finished_ms == 2000);
  CHECK(w.length() == 0);  // acknowledged and deleted
  CHECK(w.stream.finish(w.c, got[0], "node-a", "failed", "", "again", "", 3000).value() ==
        Fenced::kNotYours);  // exactly one end
  CHECK(w.stream.task(w.c, id)->state == "completed");
  CHECK(w.c.command({"LPOP", "sp:end:" + std::to_string(id)})->str == "completed");
}

TEST_CASE("a node whose entry another claimed can write neither attempt nor end") {
  StreamWorld w;
  const std::uint64_t id = w.submit("x");
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  REQUIRE(w.stream.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  // node-a is thought dead: node-b claims its entry.
  auto claimed = w.c.command(
      {"XCLAIM", w.stream.stream_key(), "sandpool", "node-b", "0", got[0].entry_id, "JUSTID"});
  REQUIRE(claimed.is_ok());
  REQUIRE(claimed->elements.size() == 1);
  CHECK(w.stream.record_attempt(w.c, got[0], "node-a", "a2").value() == Fenced::kNotYours);
  CHECK(w.stream.finish(w.c, got[0], "node-a", "completed", "late", "", "", 5).value() ==
        Fenced::kNotYours);
  CHECK(w.stream.finish(w.c, got[0], "node-b", "completed", "b", "", "", 6).value() ==
        Fenced::kDone);
  const auto t = w.stream.task(w.c, id);
  CHECK(t->result == "b");
  CHECK(t->attempts == 1);
  CHECK(t->history == std::vector<std::string>{"a1"});
}

TEST_CASE("a node reads no more entries than it asks for") {
  StreamWorld w;
  for (int i = 0; i < 5; ++i) w.submit(std::to_string(i));
  CHECK(w.read("node-a", 2).size() == 2);
  CHECK(w.read("node-b", 10).size() == 3);
  CHECK(w.read("node-a", 10).empty());
}

TEST_CASE("an idempotency key used again answers the first task and adds nothing") {
  StreamWorld w;
  const std::uint64_t first = w.submit("a", "order-17");
  CHECK(w.submit("b", "order-17") == first);
  CHECK(w.submit("c", "order-18") != first);
  CHECK(w.length() == 2);
}

TEST_CASE("ids are unique across connections, as across nodes") {
  StreamWorld w;
  auto other = redis::Connection::open(w.server.endpoint()).value();
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    ids.insert(w.submit("a"));
    StreamTask t;
    t.type = "echo";
    ids.insert(w.stream.submit(other, t, 1).value());
  }
  CHECK(ids.size() == 100);
}

TEST_CASE("a deferred task waits out its backoff outside the stream and comes back when due") {
  StreamWorld w;
  const std::string payload("p\0q", 3);
  const std::uint64_t id = w.submit(payload);
  auto got = w.read("node-a", 1);
  REQUIRE(w.stream.defer(w.c, got[0], "node-a", 5000).value() == Fenced::kDone);
  CHECK(w.stream.task(w.c, id)->state == "retry_wait");
  CHECK(w.length() == 0);
  CHECK(w.stream.move_due(w.c, 4999, 100).value() == 0);
  CHECK(w.stream.move_due(w.c, 5000, 100).value() == 1);
  CHECK(w.stream.move_due(w.c, 9999, 100).value() == 0);  // moved once
  CHECK(w.stream.task(w.c, id)->state == "queued");
  auto again = w.read("node-b", 1);  // any node takes it up
  REQUIRE(again.size() == 1);
  CHECK(again[0].task_id == id);
  CHECK(again[0].task.payload == payload);
  CHECK(again[0].entry_id != got[0].entry_id);
}

TEST_CASE("an entry added by a plain XADD, as from any language, is read") {
  StreamWorld w;
  const auto id = w.c.command({"INCR", "sp:ids"})->integer;
  REQUIRE(w.c.command({"XADD", w.stream.stream_key(), "*", "id", std::to_string(id), "type", "echo",
                       "payload", "hi", "retries", "2"})
              .is_ok());
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].task_id == static_cast<std::uint64_t>(id));
  CHECK(got[0].task.retries == 2u);
  // One without an id comes back marked, beside a good one, and is discarded.
  REQUIRE(w.c.command({"XADD", w.stream.stream_key(), "*", "type", "echo"}).is_ok());
  w.submit("good");
  auto two = w.read("node-a", 10);
  REQUIRE(two.size() == 2);
  CHECK_FALSE(two[0].malformed.empty());
  CHECK(two[1].malformed.empty());
  CHECK(w.stream.discard(w.c, two[0], "node-b").value() == Fenced::kNotYours);
  CHECK(w.stream.discard(w.c, two[0], "node-a").value() == Fenced::kDone);
  CHECK(w.length() == 2);  // the plain one and the good one, pending until they end
}

TEST_CASE("finished tasks past the bound are evicted, oldest first") {
  StreamWorld w;  // keeps 3
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(w.submit(std::to_string(i)));
  auto got = w.read("node-a", 5);
  REQUIRE(got.size() == 5);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(w.stream.record_attempt(w.c, got[i], "node-a", "a").value() == Fenced::kDone);
    REQUIRE(w.stream.finish(w.c, got[i], "node-a", "completed", "", "", "", 100 + i).value() ==
            Fenced::kDone);
  }
  CHECK(w.stream.task(w.c, ids[0]).status().code() == Code::kNotFound);
  CHECK(w.stream.task(w.c, ids[1]).status().code() == Code::kNotFound);
  CHECK(w.c.command({"EXISTS", "sp:task:" + std::to_string(ids[0]) + ":attempts"})->integer == 0);
  CHECK(w.stream.task(w.c, ids[2])->state == "completed");
  CHECK(w.stream.task(w.c, ids[4])->state == "completed");
}

namespace {

// Makes an entry look idle for `ms` (as a dead node's would), without waiting.
void age(StreamWorld& w, const std::string& owner, const std::string& entry, int ms) {
  REQUIRE(w.c.command({"XCLAIM", w.stream.stream_key(), "sandpool", owner, "0", entry, "IDLE",
                       std::to_string(ms), "JUSTID"})
              .is_ok());
}

std::string owner_of(StreamWorld& w, const std::string& entry) {
  auto p = w.c.command({"XPENDING", w.stream.stream_key(), "sandpool", entry, entry, "1"});
  REQUIRE(p.is_ok());
  return p->elements.empty() ? "" : p->elements[0].elements[1].str;
}

}  // namespace

TEST_CASE("a dead node's idle entries are claimed, a live node's touched ones are not") {
  StreamWorld w;
  for (int i = 0; i < 30; ++i) w.submit(std::to_string(i));
  auto held = w.read("node-a", 30);
  REQUIRE(held.size() == 30);
  std::vector<std::string> live;
  for (std::size_t i = 0; i < held.size(); ++i) {
    age(w, "node-a", held[i].entry_id, 100000);
    if (i % 2 == 1) live.push_back(held[i].entry_id);
  }
  REQUIRE(w.stream.touch(w.c, "node-a", live).value() == live.size());  // node-a runs these
  auto claimed = w.stream.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 100);
  REQUIRE(claimed.is_ok());
  CHECK(claimed->size() == 15);
  for (const StreamEntry& e : *claimed) {
    CHECK(e.deliveries == 2);  // read by node-a, claimed by node-b
    CHECK(owner_of(w, e.entry_id) == "node-b");
  }
  for (const std::string& e : live) CHECK(owner_of(w, e) == "node-a");
  // node-a, back from a pause, may not touch or finish what node-b took.
  CHECK(w.stream.touch(w.c, "node-a", {(*claimed)[0].entry_id}).value() == 0);
  CHECK(owner_of(w, (*claimed)[0].entry_id) == "node-b");
  CHECK(w.stream.finish(w.c, (*claimed)[0], "node-a", "completed", "", "", "", 1).value() ==
        Fenced::kNotYours);
  CHECK(w.stream.finish(w.c, (*claimed)[0], "node-b", "completed", "", "", "", 1).value() ==
        Fenced::kDone);
}

TEST_CASE("claims stop at the number asked for, and go on where they stopped") {
  StreamWorld w;
  for (int i = 0; i < 12; ++i) w.submit(std::to_string(i));
  auto held = w.read("node-a", 12);
  for (const StreamEntry& e : held) age(w, "node-a", e.entry_id, 100000);
  auto first = w.stream.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 5);
  REQUIRE(first.is_ok());
  CHECK(first->size() == 5);
  auto rest = w.stream.claim_idle(w.c, "node-c", std::chrono::milliseconds(50000), 100);
  REQUIRE(rest.is_ok());
  CHECK(rest->size() == 7);  // node-b's five are fresh now: not idle enough
}

TEST_CASE("a dead-lettered end adds the letter, with the task's payload, to the pool's stream") {
  StreamWorld w;
  const std::string payload("dl\0x", 4);
  const std::uint64_t id = w.submit(payload);
  auto got = w.read("node-a", 1);
  REQUIRE(w.stream.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  REQUIRE(
      w.stream.finish(w.c, got[0], "node-a", "dead_lettered", "", "boom", "retries_exhausted", 777)
          .value() == Fenced::kDone);
  auto letters = w.stream.dead_letters(w.c, 10);
  REQUIRE(letters.is_ok());
  REQUIRE(letters->size() == 1);
  std::map<std::string, std::string> f(letters->front().begin(), letters->front().end());
  CHECK(f["id"] == std::to_string(id));
  CHECK(f["payload"] == payload);
  CHECK(f["reason"] == "retries_exhausted");
  CHECK(f["error"] == "boom");
  CHECK(f["attempts"] == "1");
  CHECK(f["dead_lettered_ms"] == "777");
  CHECK(w.stream.task(w.c, id)->state == "dead_lettered");
}

TEST_CASE("rate buckets are taken all or none, and a refusal says the longest wait") {
  StreamWorld w;
  using Bucket = redis::TaskStream::Bucket;
  const std::int64_t hour = 3600000;
  const Bucket pool{w.stream.rate_key("pool", ""), 2, hour, 2};
  const Bucket tenant{w.stream.rate_key("tenant", "acme"), 1, hour, 1};
  auto first = w.stream.take_tokens(w.c, {pool, tenant});
  REQUIRE(first.is_ok());
  CHECK(first->taken);
  auto second = w.stream.take_tokens(w.c, {pool, tenant});
  REQUIRE(second.is_ok());
  CHECK_FALSE(second->taken);
  CHECK(second->worst == 1);  // the tenant's: empty for an hour
  CHECK(second->wait_ms > 3500000);
  // The refusal took nothing: the pool's second token is still there, once.
  CHECK(w.stream.take_tokens(w.c, {pool})->taken);
  auto third = w.stream.take_tokens(w.c, {pool});
  REQUIRE(third.is_ok());
  CHECK_FALSE(third->taken);
  CHECK(third->worst == 0);
  CHECK(third->wait_ms > 1700000);  // half an hour to one token at 2 an hour
  CHECK(third->wait_ms <= 1800000);
  // A bucket of its own for another tenant, and the keys expire once full again.
  CHECK(
      w.stream.take_tokens(w.c, {Bucket{w.stream.rate_key("tenant", "other"), 1, hour, 1}})->taken);
  CHECK(w.c.command({"PTTL", tenant.key})->integer > 3500000);
}

TEST_CASE("a task over a rate limit waits in the later set, unrun and with no attempt counted") {
  StreamWorld w;
  using Bucket = redis::TaskStream::Bucket;
  const Bucket tenant{w.stream.rate_key("tenant", "acme"), 10, 1000, 1};
  const std::uint64_t a = w.submit("a"), b = w.submit("b"), cancelled = w.submit("c");
  auto got = w.read("node-a", 3);
  REQUIRE(got.size() == 3);
  // Not the node's entry: refused, and nothing moves.
  CHECK_FALSE(w.stream.throttle(w.c, got[0], "node-b", tenant, 50, 10000)->has_value());
  const auto due_a = w.stream.throttle(w.c, got[0], "node-a", tenant, 50, 10000);
  REQUIRE(due_a.is_ok());
  REQUIRE(due_a->has_value());
  CHECK(**due_a == 10050);
  // The next one on this bucket comes back one interval (100 ms) after it, not at once.
  const auto due_b = w.stream.throttle(w.c, got[1], "node-a", tenant, 50, 10000);
  CHECK(**due_b == 10150);
  REQUIRE(w.stream.throttle(w.c, got[2], "node-a", tenant, 50, 10000)->has_value());
  CHECK(w.length() == 0);
  CHECK(w.c.command({"XPENDING", w.stream.stream_key(), "sandpool"})->elements[0].integer == 0);
  const auto t = w.stream.task(w.c, a);
  CHECK(t->state == "queued");
  CHECK(t->attempts == 0);
  CHECK(w.c.command({"HGET", "sp:task:" + std::to_string(a), "throttled"})->str == "1");
  // Cancelled where it waits.
  CHECK(w.stream.cancel(w.c, cancelled, 10001)->state == "cancelled");
  CHECK(w.stream.move_due(w.c, 10100, 10).value() == 1);  // a only
  auto back = w.read("node-b", 10);
  REQUIRE(back.size() == 1);
  CHECK(back[0].task_id == a);
  CHECK(back[0].task.payload == "a");
  CHECK(w.stream.move_due(w.c, 20000, 10).value() == 1);
  back = w.read("node-b", 10);
  REQUIRE(back.size() == 1);
  CHECK(back[0].task_id == b);
  CHECK(w.stream.task(w.c, b)->attempts == 0);
}
