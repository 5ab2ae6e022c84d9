// The task stream's scripts (TaskProducer, TaskConsumer, TaskUpkeep) against a real redis-server
// (redis_server.hpp): a task's way through Redis, the fence that keeps a node that lost its entry
// from writing, exactly one end.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::redis::Fenced;
using sandpool::redis::StreamEntry;
using sandpool::redis::StreamTask;
using sandpool::testing::end_one;
using sandpool::testing::PoolSides;
using sandpool::testing::RedisServer;

namespace {

struct StreamWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  PoolSides stream{"sp:", "echo", redis::PoolLimits{.finished = 3}};
  StreamWorld() { REQUIRE(stream.upkeep.ensure_group(c).is_ok()); }

  std::uint64_t submit(const std::string& payload, const std::string& idem = "") {
    StreamTask t;
    t.type = "echo";
    t.payload = payload;
    t.options.idempotency_key = idem;
    auto id = stream.producer.submit(c, t, 1000);
    REQUIRE(id.is_ok());
    return id->id;
  }
  std::vector<StreamEntry> read(const std::string& consumer, std::size_t n) {
    auto got = stream.consumer.read(c, consumer, n, std::chrono::milliseconds(0));
    REQUIRE(got.is_ok());
    return std::move(got).value();
  }
  std::int64_t length() { return c.command({"XLEN", stream.keys.stream_key()})->integer; }
  // Slot `s` of schedule "nightly" claimed on `conn` as `node` (its task's payload: the node).
  Result<redis::TaskProducer::SlotClaim> claim_nightly(redis::Connection& conn, std::int64_t s,
                                                       const std::string& node) {
    StreamTask t;
    t.type = "echo";
    t.payload = node;
    t.options.idempotency_key = "sandpool-schedule-nightly-" + std::to_string(s);
    return stream.producer.claim_slot(conn, t, "nightly", s, node, 1000);
  }
};

}  // namespace

TEST_CASE("a task is submitted, read by one node, and finished once") {
  StreamWorld w;
  const std::string payload("bin\0ary", 7);
  const std::uint64_t id = w.submit(payload);
  CHECK(w.stream.producer.task(w.c, id)->state == "queued");
  auto got = w.read("node-a", 10);
  REQUIRE(got.size() == 1);
  CHECK(got[0].task_id == id);
  CHECK(got[0].task.payload == payload);
  CHECK(w.read("node-b", 10).empty());  // the group hands an entry to one consumer
  REQUIRE(end_one(w.stream, w.c, got[0], "node-a", "completed", "out", "", "", 2000).value() ==
          Fenced::kDone);
  const auto t = w.stream.producer.task(w.c, id);
  REQUIRE(t.is_ok());
  CHECK(t->state == "completed");
  CHECK(t->result == "out");
  CHECK(t->node == "node-a");
  CHECK(t->finished_ms == 2000);
  CHECK(w.length() == 0);  // acknowledged and deleted
  CHECK(end_one(w.stream, w.c, got[0], "node-a", "failed", "", "again", "", 3000).value() ==
        Fenced::kNotYours);  // exactly one end
  CHECK(w.stream.producer.task(w.c, id)->state == "completed");
  CHECK(w.stream.producer.task(w.c, id)->ends == 1);
}

// The beat records the `lost` attempts of all it claimed in one round trip (one each held the
// last of 74 claimed tasks 470 ms under a 100,000-task backlog until 2026-12-07).
TEST_CASE("attempts recorded in one round trip are fenced entry by entry") {
  StreamWorld w;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(w.submit(std::to_string(i)));
  auto got = w.read("node-a", 3);
  REQUIRE(got.size() == 3);
  REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(), "sandpool", "node-b", "0",
                       got[1].entry_id, "JUSTID"})
              ->elements.size() == 1);
  auto r = w.stream.consumer.record_attempts(w.c, {&got[0], &got[1], &got[2]}, "node-a",
                                             {"lost0", "lost1", "lost2"});
  REQUIRE(r);
  CHECK(*r == std::vector<Fenced>{Fenced::kDone, Fenced::kNotYours, Fenced::kDone});
  CHECK(w.stream.producer.task(w.c, ids[0])->history == std::vector<std::string>{"lost0"});
  CHECK(w.stream.producer.task(w.c, ids[1])->history.empty());
  CHECK(w.stream.producer.task(w.c, ids[2])->history == std::vector<std::string>{"lost2"});
  CHECK(w.stream.producer.task(w.c, ids[2])->attempts == 1);
  CHECK(w.stream.consumer.record_attempts(w.c, {}, "node-a", {}).value().empty());
}

TEST_CASE("a node whose entry another claimed can write neither attempt nor end") {
  StreamWorld w;
  const std::uint64_t id = w.submit("x");
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  REQUIRE(w.stream.consumer.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  // node-a is thought dead: node-b claims its entry.
  auto claimed = w.c.command(
      {"XCLAIM", w.stream.keys.stream_key(), "sandpool", "node-b", "0", got[0].entry_id, "JUSTID"});
  REQUIRE(claimed.is_ok());
  REQUIRE(claimed->elements.size() == 1);
  CHECK(w.stream.consumer.record_attempt(w.c, got[0], "node-a", "a2").value() == Fenced::kNotYours);
  CHECK(end_one(w.stream, w.c, got[0], "node-a", "completed", "late", "", "", 5).value() ==
        Fenced::kNotYours);
  CHECK(end_one(w.stream, w.c, got[0], "node-b", "completed", "b", "", "", 6).value() ==
        Fenced::kDone);
  const auto t = w.stream.producer.task(w.c, id);
  CHECK(t->result == "b");
  CHECK(t->attempts == 1);
  CHECK(t->history == std::vector<std::string>{"a1"});
}

// A refusal is counted once per entry and node: refused.lua's count and the end that the
// writer sends after it are two round trips, and a batch that fails between them is sent
// again (counted twice until 2026-12-07, so a task was dead-lettered `rejected` after fewer
// refusals than kMaxRefusals).
TEST_CASE("a refusal sent again for the same entry counts once, a new entry's again") {
  using Verdict = redis::TaskConsumer::Refusal::Verdict;
  StreamWorld w;
  const std::uint64_t id = w.submit("x");
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  // No live node (no heartbeat key) but the kMaxRefusals bound: the first refusals defer it.
  auto first =
      w.stream.consumer.refused(w.c, got[0], "node-a", 1000, std::chrono::milliseconds(100));
  REQUIRE(first);
  CHECK(first->verdict == Verdict::kDeferred);
  CHECK(first->refusals == 1);
  CHECK(first->due_ms == 1100);
  // Sent again: the entry went to the later set with the first, so this one is fenced.
  CHECK(w.stream.consumer.refused(w.c, got[0], "node-a", 1000, std::chrono::milliseconds(100))
            ->verdict == Verdict::kNotYours);
  std::uint32_t refusals = 1;
  for (;;) {
    REQUIRE(w.stream.upkeep.move_due(w.c, 10'000, 10).value() == 1);
    auto again = w.read("node-a", 1);  // a new entry
    REQUIRE(again.size() == 1);
    CHECK(again[0].task_id == id);
    auto r =
        w.stream.consumer.refused(w.c, again[0], "node-a", 1000, std::chrono::milliseconds(100));
    REQUIRE(r);
    CHECK(r->refusals == ++refusals);
    if (refusals < redis::TaskConsumer::kMaxRefusals) {
      CHECK(r->verdict == Verdict::kDeferred);
      continue;
    }
    CHECK(r->verdict == Verdict::kReject);
    // The writer's end failed; the batch goes again: the same refusal, not a sixth.
    auto resent =
        w.stream.consumer.refused(w.c, again[0], "node-a", 1000, std::chrono::milliseconds(100));
    CHECK(resent->verdict == Verdict::kReject);
    CHECK(resent->refusals == refusals);
    break;
  }
}

// A task one node refuses, another live node would run: the bound is every live node's, not
// a count of refusals alone (issue 36).
TEST_CASE("a task is left to end rejected only once every live node refused it, five times") {
  using Verdict = redis::TaskConsumer::Refusal::Verdict;
  StreamWorld w;
  w.submit("y");
  const std::uint64_t id = w.submit("x");
  // node-b is a consumer of the pool (it read "y") whose heartbeat key lives.
  REQUIRE(w.read("node-b", 1).size() == 1);
  REQUIRE(w.stream.consumer.join(w.c, "node-a").is_ok());
  REQUIRE(w.c.command({"SET", "sp:node:node-b", "b", "PX", "60000"}));
  REQUIRE(w.c.command({"SET", "sp:node:node-a", "a", "PX", "60000"}));
  const auto refuse = [&](const std::string& node) {
    REQUIRE(w.stream.upkeep.move_due(w.c, 10'000, 10).is_ok());
    auto got = w.read(node, 1);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].task_id == id);
    auto r = w.stream.consumer.refused(w.c, got[0], node, 1000, std::chrono::milliseconds(100));
    REQUIRE(r);
    return *r;
  };
  for (std::uint32_t n = 1; n <= 2 * redis::TaskConsumer::kMaxRefusals; ++n) {
    const auto r = refuse("node-a");
    CHECK(r.refusals == n);
    CHECK(r.verdict == Verdict::kDeferred);  // node-b may run it
  }
  CHECK(w.c.command({"HGET", "sp:task:" + std::to_string(id), "state"})->str == "queued");
  SECTION("node-b refuses it too: it ends") {
    const auto r = refuse("node-b");
    CHECK(r.refusals == 2 * redis::TaskConsumer::kMaxRefusals + 1);
    CHECK(r.verdict == Verdict::kReject);
  }
  SECTION("node-b dies: node-a is the only live node, and it refused") {
    REQUIRE(w.c.command({"DEL", "sp:node:node-b"}));
    CHECK(refuse("node-a").verdict == Verdict::kReject);
  }
  SECTION("a new node is live and has not refused it: it waits for that node") {
    REQUIRE(w.c.command({"DEL", "sp:node:node-b"}));
    REQUIRE(w.c.command({"SET", "sp:node:node-c", "c", "PX", "60000"}));
    REQUIRE(
        w.stream.consumer.join(w.c, "node-c").is_ok());  // a node of the pool, which read nothing
    CHECK(refuse("node-a").verdict == Verdict::kDeferred);
  }
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

TEST_CASE(
    "a schedule's slot is claimed with its submit: the first node wins, the rest lose to it") {
  StreamWorld w;
  auto other = redis::Connection::open(w.server.endpoint()).value();
  // Slots near Redis's own clock (the script refuses one far ahead of it).
  const std::int64_t now_s = std::stoll(w.c.command({"TIME"})->elements.at(0).str);
  const std::int64_t slot = now_s - now_s % 60;
  auto won = w.claim_nightly(w.c, slot, "n0");
  REQUIRE(won.is_ok());
  CHECK(won->won);
  CHECK(won->node == "n0");
  CHECK(w.stream.producer.task(w.c, won->task_id)->state == "queued");
  // The same slot from another node, or again from the winner (a restart): lost, that task.
  for (const char* node : {"n1", "n0"}) {
    auto lost = w.claim_nightly(other, slot, node);
    REQUIRE(lost.is_ok());
    CHECK_FALSE(lost->won);
    CHECK(lost->task_id == won->task_id);
    CHECK(lost->node == "n0");
  }
  // An older slot (a node whose clock lags, a catch-up after the idempotency key was
  // evicted) is lost to the claim too, and makes no task.
  auto older = w.claim_nightly(other, slot - 60, "n1");
  REQUIRE(older.is_ok());
  CHECK_FALSE(older->won);
  CHECK(older->task_id == won->task_id);
  CHECK(w.length() == 1);
  // The next slot is anyone's.
  auto next = w.claim_nightly(other, slot + 60, "n1");
  REQUIRE(next.is_ok());
  CHECK(next->won);
  CHECK(next->task_id != won->task_id);
  CHECK(w.length() == 2);
  auto held = w.c.command({"HMGET", w.stream.keys.schedule_claim_key("nightly"), "slot", "node"});
  REQUIRE(held);
  CHECK(held->elements.at(0).str == std::to_string(slot + 60));
  CHECK(held->elements.at(1).str == "n1");
  // A slot far ahead of Redis's clock is refused, and claims nothing.
  auto ahead = w.claim_nightly(w.c, now_s + 2 * redis::TaskProducer::kMaxSlotLeadSeconds, "n0");
  REQUIRE_FALSE(ahead.is_ok());
  CHECK_THAT(ahead.status().message(), Catch::Contains("ahead of redis clock"));
  CHECK(w.length() == 2);
}

TEST_CASE("a schedule paused in its claim hash wins no slot on any node until resumed") {
  StreamWorld w;
  auto other = redis::Connection::open(w.server.endpoint()).value();
  const std::int64_t now_s = std::stoll(w.c.command({"TIME"})->elements.at(0).str);
  const std::int64_t slot = now_s - now_s % 60;
  auto first = w.claim_nightly(w.c, slot - 60, "n0");
  REQUIRE(first.is_ok());
  REQUIRE(first->won);
  REQUIRE(w.stream.producer.set_schedule_paused(w.c, "nightly", true, "n0", 5000).is_ok());
  for (redis::Connection* c : {&w.c, &other}) {
    auto paused = w.claim_nightly(*c, slot, c == &w.c ? "n0" : "n1");
    REQUIRE(paused.is_ok());
    CHECK(paused->paused);
    CHECK_FALSE(paused->won);
    CHECK(paused->node == "n0");
    CHECK(paused->task_id == first->task_id);
  }
  CHECK(w.length() == 1);
  auto held =
      w.c.command({"HMGET", w.stream.keys.schedule_claim_key("nightly"), "slot", "paused_ms"});
  REQUIRE(held);
  CHECK(held->elements.at(0).str == std::to_string(slot - 60));
  CHECK(held->elements.at(1).str == "5000");
  // Resumed from the other node: the slot is won again.
  REQUIRE(w.stream.producer.set_schedule_paused(other, "nightly", false, "n1", 6000).is_ok());
  auto won = w.claim_nightly(other, slot, "n1");
  REQUIRE(won.is_ok());
  CHECK(won->won);
  CHECK_FALSE(won->paused);
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
    ids.insert(w.stream.producer.submit(other, t, 1).value().id);
  }
  CHECK(ids.size() == 100);
}

TEST_CASE("a deferred task waits out its backoff outside the stream and comes back when due") {
  StreamWorld w;
  const std::string payload("p\0q", 3);
  const std::uint64_t id = w.submit(payload);
  auto got = w.read("node-a", 1);
  // A retry with one attempt left and a backoff of exactly 5000 ms from 0.
  redis::TaskConsumer::Backoff backoff;
  backoff.base_ms = 5000;
  backoff.multiplier = 1.0;
  backoff.max_ms = 5000;
  backoff.jitter = 1.0;
  REQUIRE(w.stream.consumer.retry(w.c, got[0], "node-a", {"{}"}, 1, backoff, 0).value() ==
          redis::TaskConsumer::Retried::kDeferred);
  CHECK(w.stream.producer.task(w.c, id)->state == "retry_wait");
  CHECK(w.length() == 0);
  CHECK(w.stream.upkeep.move_due(w.c, 4999, 100).value() == 0);
  CHECK(w.stream.upkeep.move_due(w.c, 5000, 100).value() == 1);
  CHECK(w.stream.upkeep.move_due(w.c, 9999, 100).value() == 0);  // moved once
  CHECK(w.stream.producer.task(w.c, id)->state == "queued");
  auto again = w.read("node-b", 1);  // any node takes it up
  REQUIRE(again.size() == 1);
  CHECK(again[0].task_id == id);
  CHECK(again[0].task.payload == payload);
  CHECK(again[0].entry_id != got[0].entry_id);
}

TEST_CASE("an entry added by a plain XADD, as from any language, is read") {
  StreamWorld w;
  const auto id = w.c.command({"INCR", "sp:ids"})->integer;
  REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(), "*", "id", std::to_string(id), "type",
                       "echo", "payload", "hi", "retries", "2"})
              .is_ok());
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].task_id == static_cast<std::uint64_t>(id));
  CHECK(got[0].task.options.retries == 2u);
  // One without an id comes back marked, beside a good one, and is discarded.
  REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(), "*", "type", "echo"}).is_ok());
  w.submit("good");
  auto two = w.read("node-a", 10);
  REQUIRE(two.size() == 2);
  CHECK_FALSE(two[0].malformed.empty());
  CHECK(two[1].malformed.empty());
  CHECK(w.stream.consumer.discard(w.c, two[0], "node-b").value() == Fenced::kNotYours);
  CHECK(w.stream.consumer.discard(w.c, two[0], "node-a").value() == Fenced::kDone);
  CHECK(w.length() == 2);  // the plain one and the good one, pending until they end
}

TEST_CASE("finished tasks past the bound are evicted, oldest first") {
  StreamWorld w;  // keeps 3
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(w.submit(std::to_string(i)));
  auto got = w.read("node-a", 5);
  REQUIRE(got.size() == 5);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(w.stream.consumer.record_attempt(w.c, got[i], "node-a", "a").value() == Fenced::kDone);
    REQUIRE(end_one(w.stream, w.c, got[i], "node-a", "completed", "", "", "", 100 + i).value() ==
            Fenced::kDone);
  }
  CHECK(w.stream.producer.task(w.c, ids[0]).status().code() == Code::kNotFound);
  CHECK(w.stream.producer.task(w.c, ids[1]).status().code() == Code::kNotFound);
  CHECK(w.c.command({"EXISTS", "sp:task:" + std::to_string(ids[0]) + ":attempts"})->integer == 0);
  CHECK(w.stream.producer.task(w.c, ids[2])->state == "completed");
  CHECK(w.stream.producer.task(w.c, ids[4])->state == "completed");
}

namespace {

// Makes an entry look idle for `ms` (as a dead node's would), without waiting.
void age(StreamWorld& w, const std::string& owner, const std::string& entry, int ms) {
  REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(), "sandpool", owner, "0", entry, "IDLE",
                       std::to_string(ms), "JUSTID"})
              .is_ok());
}

// No lease of type echo's cap is held, and task `id`'s hash names none.
bool no_lease(StreamWorld& w, std::uint64_t id) {
  return w.c.command({"SCARD", w.stream.keys.cap_key("echo")})->integer == 0 &&
         w.c.command({"HEXISTS", "sp:task:" + std::to_string(id), "lease"})->integer == 0;
}

std::string owner_of(StreamWorld& w, const std::string& entry) {
  auto p = w.c.command({"XPENDING", w.stream.keys.stream_key(), "sandpool", entry, entry, "1"});
  REQUIRE(p.is_ok());
  return p->elements.empty() ? "" : p->elements[0].elements[1].str;
}

}  // namespace

TEST_CASE("a dead node's idle entries are claimed, a live node's touched ones are not") {
  StreamWorld w;
  for (int i = 0; i < 30; ++i) w.submit(std::to_string(i));
  auto held = w.read("node-a", 30);
  REQUIRE(held.size() == 30);
  std::vector<std::pair<redis::Band, std::string>> live;
  for (std::size_t i = 0; i < held.size(); ++i) {
    age(w, "node-a", held[i].entry_id, 100000);
    if (i % 2 == 1) live.emplace_back(held[i].band, held[i].entry_id);
  }
  REQUIRE(w.stream.consumer.touch(w.c, "node-a", live).value() ==
          live.size());  // node-a runs these
  auto claimed = w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 100);
  REQUIRE(claimed.is_ok());
  CHECK(claimed->size() == 15);
  for (const StreamEntry& e : *claimed) {
    CHECK(e.deliveries == 2);  // read by node-a, claimed by node-b
    CHECK(owner_of(w, e.entry_id) == "node-b");
  }
  for (const auto& [band, e] : live) CHECK(owner_of(w, e) == "node-a");
  // node-a, back from a pause, may not touch or finish what node-b took.
  CHECK(
      w.stream.consumer.touch(w.c, "node-a", {{redis::Band{0}, (*claimed)[0].entry_id}}).value() ==
      0);
  CHECK(owner_of(w, (*claimed)[0].entry_id) == "node-b");
  CHECK(end_one(w.stream, w.c, (*claimed)[0], "node-a", "completed", "", "", "", 1).value() ==
        Fenced::kNotYours);
  CHECK(end_one(w.stream, w.c, (*claimed)[0], "node-b", "completed", "", "", "", 1).value() ==
        Fenced::kDone);
}

TEST_CASE("claims stop at the number asked for, and go on where they stopped") {
  StreamWorld w;
  for (int i = 0; i < 12; ++i) w.submit(std::to_string(i));
  auto held = w.read("node-a", 12);
  for (const StreamEntry& e : held) age(w, "node-a", e.entry_id, 100000);
  auto first = w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 5);
  REQUIRE(first.is_ok());
  CHECK(first->size() == 5);
  auto rest = w.stream.consumer.claim_idle(w.c, "node-c", std::chrono::milliseconds(50000), 100);
  REQUIRE(rest.is_ok());
  CHECK(rest->size() == 7);  // node-b's five are fresh now: not idle enough
}

TEST_CASE("a dead-lettered end adds the letter, with the task's payload, to the pool's stream") {
  StreamWorld w;
  const std::string payload("dl\0x", 4);
  const std::uint64_t id = w.submit(payload);
  auto got = w.read("node-a", 1);
  REQUIRE(w.stream.consumer.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  REQUIRE(end_one(w.stream, w.c, got[0], "node-a", "dead_lettered", "", "boom", "retries_exhausted",
                  777)
              .value() == Fenced::kDone);
  auto letters = w.stream.producer.dead_letters(w.c, 10);
  REQUIRE(letters.is_ok());
  REQUIRE(letters->size() == 1);
  std::map<std::string, std::string> f(letters->front().fields.begin(),
                                       letters->front().fields.end());
  CHECK(f["id"] == std::to_string(id));
  CHECK(f["payload"] == payload);
  CHECK(f["reason"] == "retries_exhausted");
  CHECK(f["error"] == "boom");
  CHECK(f["attempts"] == "1");
  CHECK(f["dead_lettered_ms"] == "777");
  CHECK(w.stream.producer.task(w.c, id)->state == "dead_lettered");
}

namespace {

std::uint64_t submit_with(StreamWorld& w, std::int32_t priority, std::optional<std::int64_t> due,
                          const std::string& payload) {
  StreamTask t;
  t.type = "echo";
  t.payload = payload;
  t.options.priority = priority;
  REQUIRE(t.options.set_not_before_ms(due));
  auto id = w.stream.producer.submit(w.c, t, 1000);
  REQUIRE(id.is_ok());
  return id->id;
}

std::int64_t band_length(StreamWorld& w, redis::Band b) {
  return w.c.command({"XLEN", w.stream.keys.stream_key(b)})->integer;
}

}  // namespace

TEST_CASE("each priority band has its stream, and a node reads the higher bands first") {
  StreamWorld w;
  submit_with(w, -3, std::nullopt, "low");
  submit_with(w, 0, std::nullopt, "normal");
  submit_with(w, 7, std::nullopt, "high");
  submit_with(w, 1, std::nullopt, "high too");
  CHECK(band_length(w, 1) == 2);
  CHECK(band_length(w, 0) == 1);
  CHECK(band_length(w, -1) == 1);
  auto first = w.read("node-a", 3);
  REQUIRE(first.size() == 3);
  CHECK(first[0].task.payload == "high");
  CHECK(first[0].band == 1);
  CHECK(first[1].task.payload == "high too");
  CHECK(first[2].task.payload == "normal");
  CHECK(first[2].band == 0);
  auto last = w.read("node-b", 10);
  REQUIRE(last.size() == 1);
  CHECK(last[0].task.payload == "low");
  CHECK(last[0].band == -1);
  // Each ends in its own stream, fenced there.
  for (const StreamEntry& e : first) {
    CHECK(end_one(w.stream, w.c, e, "node-a", "completed", "", "", "", 5).value() == Fenced::kDone);
  }
  CHECK(end_one(w.stream, w.c, last[0], "node-b", "completed", "", "", "", 5).value() ==
        Fenced::kDone);
  CHECK(band_length(w, 1) + band_length(w, 0) + band_length(w, -1) == 0);
}

TEST_CASE("a blocked read wakes for an entry of any band") {
  StreamWorld w;
  std::thread late([&w] {
    auto c = redis::Connection::open(w.server.endpoint()).value();
    // Once the reader is blocked (Redis counts it), so that the blocking read is what wakes.
    for (int i = 0; i < 20000; ++i) {
      auto info = c.command({"INFO", "clients"});
      if (info && info->str.find("blocked_clients:1") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    StreamTask t;
    t.type = "echo";
    t.payload = "late";
    t.options.priority = -1;
    (void)w.stream.producer.submit(c, t, 1000);
  });
  // Blocks until the low band's entry arrives (the bound is generous; it comes at once).
  std::vector<StreamEntry> got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    got = w.stream.consumer.read(w.c, "node-a", 5, std::chrono::milliseconds(2000)).value();
  }
  late.join();
  REQUIRE(got.size() == 1);
  CHECK(got[0].band == -1);
  CHECK(got[0].task.payload == "late");
}

TEST_CASE("entries of two bands with one id are two entries") {
  StreamWorld w;
  for (const redis::Band b : {redis::Band{1}, redis::Band{0}}) {
    REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(b), "5-1", "id",
                         std::to_string(redis::PoolKeys::kFirstId + 10 + b), "type", "echo"})
                .is_ok());
  }
  auto got = w.read("node-a", 5);
  REQUIRE(got.size() == 2);
  CHECK(got[0].entry_id == got[1].entry_id);
  CHECK(got[0].band != got[1].band);
  CHECK(end_one(w.stream, w.c, got[1], "node-a", "completed", "", "", "", 5).value() ==
        Fenced::kDone);
  CHECK(band_length(w, 1) == 1);  // the other band's entry of the same id is still there
  CHECK(end_one(w.stream, w.c, got[0], "node-a", "completed", "", "", "", 5).value() ==
        Fenced::kDone);
  CHECK(band_length(w, 1) == 0);
}

TEST_CASE("a taken task says running on its node, and a plain XADD's task gets its hash") {
  StreamWorld w;
  const std::uint64_t id = w.submit("x");
  const std::uint64_t plain = redis::PoolKeys::kFirstId + 99;
  REQUIRE(w.c.command({"XADD", w.stream.keys.stream_key(-1), "*", "id", std::to_string(plain),
                       "type", "echo", "payload", "p"})
              .is_ok());
  CHECK(w.stream.producer.task(w.c, plain).status().code() == Code::kNotFound);
  auto got = w.read("node-a", 5);
  REQUIRE(got.size() == 2);
  REQUIRE(w.stream.consumer.take(w.c, "node-a", got).is_ok());
  for (const std::uint64_t t : {id, plain}) {
    auto stored = w.stream.producer.task(w.c, t);
    REQUIRE(stored.is_ok());
    CHECK(stored->state == "running");
    CHECK(stored->node == "node-a");
    CHECK(stored->pool == "echo");
    CHECK(stored->type == "echo");
    CHECK(stored->submitted_ms > 0);
  }
  // A retry's count reaches the next node through take().
  REQUIRE(w.stream.consumer.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  REQUIRE(w.stream.consumer.release(w.c, got[0], "node-a").value() == Fenced::kDone);
  CHECK(w.stream.producer.task(w.c, got[0].task_id)->state == "queued");
  auto again = w.read("node-b", 5);
  REQUIRE(again.size() == 1);
  REQUIRE(w.stream.consumer.take(w.c, "node-b", again).is_ok());
  CHECK(again[0].attempts == 1);
  CHECK(again[0].band == got[0].band);  // handed back into its own band
  CHECK(w.stream.producer.task(w.c, again[0].task_id)->node == "node-b");
}

TEST_CASE("a scheduled task waits in the later set and joins its band when due") {
  StreamWorld w;
  const std::uint64_t id = submit_with(w, 5, 61000, "at one minute");
  const std::uint64_t now = submit_with(w, 5, 900, "due already");  // not_before in the past
  CHECK(w.stream.producer.task(w.c, id)->state == "scheduled");
  CHECK(w.stream.producer.task(w.c, now)->state == "queued");
  CHECK(band_length(w, 1) == 1);
  CHECK(w.stream.upkeep.move_due(w.c, 60999, 100).value() == 0);
  CHECK(w.stream.upkeep.move_due(w.c, 61000, 100).value() == 1);
  CHECK(w.stream.producer.task(w.c, id)->state == "queued");
  CHECK(band_length(w, 1) == 2);
  auto got = w.read("node-a", 5);
  REQUIRE(got.size() == 2);
  CHECK(got[1].task_id == id);
  CHECK(got[1].task.payload == "at one minute");
  CHECK(got[1].task.options.priority == 5);
}

TEST_CASE("a retried task goes back to its own band when its backoff is over") {
  StreamWorld w;
  const std::uint64_t id = submit_with(w, -2, std::nullopt, "low retry");
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  redis::TaskConsumer::Backoff b;
  b.base_ms = 10;
  b.jitter = 1.0;
  REQUIRE(w.stream.consumer.retry(w.c, got[0], "node-a", {"a1"}, 3, b, 1000).value() ==
          redis::TaskConsumer::Retried::kDeferred);
  CHECK(w.stream.producer.task(w.c, id)->state == "retry_wait");
  CHECK(w.stream.upkeep.move_due(w.c, 1010, 100).value() == 1);
  CHECK(band_length(w, -1) == 1);
  CHECK(band_length(w, 0) == 0);
}

TEST_CASE("a scheduled task is cancelled at once") {
  StreamWorld w;
  const std::uint64_t id = submit_with(w, 0, 50000, "never");
  auto c = w.stream.producer.cancel(w.c, id, 2000);
  REQUIRE(c.is_ok());
  CHECK(c->state == "cancelled");
  CHECK(w.stream.producer.task(w.c, id)->state == "cancelled");
  CHECK(w.stream.upkeep.move_due(w.c, 60000, 100).value() == 0);
  CHECK(w.read("node-a", 5).empty());
  // And a queued one of a non-default band is cancelled from its own stream.
  const std::uint64_t low = submit_with(w, -1, std::nullopt, "low");
  CHECK(w.stream.producer.cancel(w.c, low, 2000)->state == "cancelled");
  CHECK(band_length(w, -1) == 0);
}

TEST_CASE("finished tasks are trimmed by age and by the bytes of their results") {
  RedisServer server;
  auto c = redis::Connection::open(server.endpoint()).value();
  redis::PoolLimits limits;
  limits.finished = 1000;
  limits.finished_max_age_ms = 10000;
  limits.finished_max_bytes = 250;
  PoolSides stream("sp:", "echo", limits);
  REQUIRE(stream.upkeep.ensure_group(c).is_ok());
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    StreamTask t;
    t.type = "echo";
    t.options.idempotency_key = "k" + std::to_string(i);
    ids.push_back(stream.producer.submit(c, t, 1000).value().id);
  }
  auto got = stream.consumer.read(c, "node-a", 6, std::chrono::milliseconds(0)).value();
  REQUIRE(got.size() == 6);
  // Ended at 1000, 2000, ... 6000, each with a 100-byte result: 600 bytes in all.
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(end_one(stream, c, got[i], "node-a", "completed", std::string(100, 'r'), "", "",
                    1000 * static_cast<std::int64_t>(i + 1))
                .value() == Fenced::kDone);
  }
  CHECK(c.command({"GET", "sp:echo:done:bytes"})->str == "600");
  // At 12500 the first two (ended before 2500) are too old; then 400 bytes are over 250, so
  // the two oldest left go too.
  CHECK(stream.upkeep.trim_finished(c, 12500, 1000).value() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(stream.producer.task(c, ids[i]).status().code() == Code::kNotFound);
    CHECK(c.command({"EXISTS", "sp:idem:k" + std::to_string(i)})->integer == 0);
  }
  CHECK(stream.producer.task(c, ids[4])->state == "completed");
  CHECK(stream.producer.task(c, ids[5])->state == "completed");
  CHECK(c.command({"GET", "sp:echo:done:bytes"})->str == "200");
  CHECK(c.command({"ZCARD", "sp:echo:done"})->integer == 2);
  CHECK(stream.upkeep.trim_finished(c, 12500, 1000).value() == 0);
}

TEST_CASE("rate buckets are taken all or none, and a refusal says the longest wait") {
  StreamWorld w;
  using Bucket = redis::TaskUpkeep::Bucket;
  const std::int64_t hour = 3600000;
  const Bucket pool{w.stream.keys.rate_key("pool", ""), 2, hour, 2};
  const Bucket tenant{w.stream.keys.rate_key("tenant", "acme"), 1, hour, 1};
  auto first = w.stream.upkeep.take_tokens(w.c, {pool, tenant});
  REQUIRE(first.is_ok());
  CHECK(first->taken);
  auto second = w.stream.upkeep.take_tokens(w.c, {pool, tenant});
  REQUIRE(second.is_ok());
  CHECK_FALSE(second->taken);
  CHECK(second->worst == 1);  // the tenant's: empty for an hour
  CHECK(second->wait_ms > 3500000);
  // The refusal took nothing: the pool's second token is still there, once.
  CHECK(w.stream.upkeep.take_tokens(w.c, {pool})->taken);
  auto third = w.stream.upkeep.take_tokens(w.c, {pool});
  REQUIRE(third.is_ok());
  CHECK_FALSE(third->taken);
  CHECK(third->worst == 0);
  CHECK(third->wait_ms > 1700000);  // half an hour to one token at 2 an hour
  CHECK(third->wait_ms <= 1800000);
  // A bucket of its own for another tenant, and the keys expire once full again.
  CHECK(w.stream.upkeep
            .take_tokens(w.c, {Bucket{w.stream.keys.rate_key("tenant", "other"), 1, hour, 1}})
            ->taken);
  CHECK(w.c.command({"PTTL", tenant.key})->integer > 3500000);
}

TEST_CASE("a task over a rate limit waits in the later set, unrun and with no attempt counted") {
  StreamWorld w;
  using Bucket = redis::TaskUpkeep::Bucket;
  const Bucket tenant{w.stream.keys.rate_key("tenant", "acme"), 10, 1000, 1};
  const std::uint64_t a = w.submit("a"), b = w.submit("b"), cancelled = w.submit("c");
  auto got = w.read("node-a", 3);
  REQUIRE(got.size() == 3);
  // Not the node's entry: refused, and nothing moves.
  CHECK_FALSE(w.stream.upkeep.throttle(w.c, got[0], "node-b", tenant, 50, 10000)->has_value());
  const auto due_a = w.stream.upkeep.throttle(w.c, got[0], "node-a", tenant, 50, 10000);
  REQUIRE(due_a.is_ok());
  REQUIRE(due_a->has_value());
  CHECK(**due_a == 10050);
  // The next one on this bucket comes back one interval (100 ms) after it, not at once.
  const auto due_b = w.stream.upkeep.throttle(w.c, got[1], "node-a", tenant, 50, 10000);
  CHECK(**due_b == 10150);
  REQUIRE(w.stream.upkeep.throttle(w.c, got[2], "node-a", tenant, 50, 10000)->has_value());
  CHECK(w.length() == 0);
  CHECK(w.c.command({"XPENDING", w.stream.keys.stream_key(), "sandpool"})->elements[0].integer ==
        0);
  const auto t = w.stream.producer.task(w.c, a);
  CHECK(t->state == "queued");
  CHECK(t->attempts == 0);
  CHECK(w.c.command({"HGET", "sp:task:" + std::to_string(a), "throttled"})->str == "1");
  // Cancelled where it waits.
  CHECK(w.stream.producer.cancel(w.c, cancelled, 10001)->state == "cancelled");
  CHECK(w.stream.upkeep.move_due(w.c, 10100, 10).value() == 1);  // a only
  auto back = w.read("node-b", 10);
  REQUIRE(back.size() == 1);
  CHECK(back[0].task_id == a);
  CHECK(back[0].task.payload == "a");
  CHECK(w.stream.upkeep.move_due(w.c, 20000, 10).value() == 1);
  back = w.read("node-b", 10);
  REQUIRE(back.size() == 1);
  CHECK(back[0].task_id == b);
  CHECK(w.stream.producer.task(w.c, b)->attempts == 0);
}

TEST_CASE(
    "a type's cap is a lease per running task, kept by a claimed task, given back at its end") {
  StreamWorld w;
  const std::uint64_t a = w.submit("a");
  const std::uint64_t b = w.submit("b");
  auto got = w.read("node-a", 2);
  REQUIRE(got.size() == 2);
  const redis::TaskUpkeep::Cap cap_a{w.stream.keys.cap_key("echo"), 1, a};
  const redis::TaskUpkeep::Cap cap_b{w.stream.keys.cap_key("echo"), 1, b};
  auto first = w.stream.upkeep.take_tokens(w.c, {}, cap_a);
  REQUIRE(first.is_ok());
  CHECK(first->taken);
  // The cap holds one: b waits, and is told which limit held it (the cap, after the buckets).
  auto second = w.stream.upkeep.take_tokens(w.c, {}, cap_b);
  REQUIRE(second.is_ok());
  CHECK_FALSE(second->taken);
  CHECK(second->worst == 0);
  CHECK(second->wait_ms > 0);
  // a, claimed by another node after its own died, keeps its lease.
  auto again = w.stream.upkeep.take_tokens(w.c, {}, cap_a);
  REQUIRE(again.is_ok());
  CHECK(again->taken);
  CHECK(w.c.command({"SCARD", w.stream.keys.cap_key("echo")})->integer == 1);
  // Its end gives the lease back: b may run.
  REQUIRE(end_one(w.stream, w.c, got[0], "node-a", "completed", "", "", "", 5).value() ==
          Fenced::kDone);
  CHECK(w.c.command({"SCARD", w.stream.keys.cap_key("echo")})->integer == 0);
  auto third = w.stream.upkeep.take_tokens(w.c, {}, cap_b);
  REQUIRE(third.is_ok());
  CHECK(third->taken);
  // A retry's backoff gives it back too.
  redis::TaskConsumer::Backoff backoff;
  REQUIRE(w.stream.consumer.retry(w.c, got[1], "node-a", {"a1"}, 3, backoff, 1000).value() ==
          redis::TaskConsumer::Retried::kDeferred);
  CHECK(no_lease(w, b));
}

// Session 24 noticed that a replay (letters.lua) deletes a hash's `lease` field without taking
// the id out of the cap's set, and asked whether a replayed task could leak its lease. It
// cannot: every end that makes a task a letter (or completed, or cancelled) gives the lease
// back first, so a replayed hash holds none. This pins that down.
TEST_CASE("a capped task dead-lettered and replayed holds no lease, and takes one again to run") {
  StreamWorld w;
  const std::uint64_t id = w.submit("capped");
  auto got = w.read("node-a", 1);
  REQUIRE(got.size() == 1);
  const redis::TaskUpkeep::Cap cap{w.stream.keys.cap_key("echo"), 1, id};
  auto leased = w.stream.upkeep.take_tokens(w.c, {}, cap);
  REQUIRE(leased.is_ok());
  REQUIRE(leased->taken);
  REQUIRE(w.stream.consumer.record_attempt(w.c, got[0], "node-a", "a1").value() == Fenced::kDone);
  REQUIRE(
      end_one(w.stream, w.c, got[0], "node-a", "dead_lettered", "", "boom", "retries_exhausted", 10)
          .value() == Fenced::kDone);
  CHECK(no_lease(w, id));

  redis::TaskProducer::LetterMatch m;
  m.task_id = id;
  auto swept = w.stream.producer.replay_letters(w.c, m, 20, 60000);
  REQUIRE(swept.is_ok());
  REQUIRE(swept->replayed == std::vector<std::uint64_t>{id});
  CHECK(no_lease(w, id));

  // It runs again under the cap: the one place is free, and its end frees it once more.
  auto again = w.read("node-b", 1);
  REQUIRE(again.size() == 1);
  auto relet = w.stream.upkeep.take_tokens(w.c, {}, cap, &again.front(), "node-b");
  REQUIRE(relet.is_ok());
  CHECK(relet->taken);
  REQUIRE(end_one(w.stream, w.c, again[0], "node-b", "completed", "ok", "", "", 30).value() ==
          Fenced::kDone);
  CHECK(no_lease(w, id));
  CHECK(w.stream.producer.task(w.c, id)->state == "completed");
}

TEST_CASE(
    "a node that stalled between its read and its take while another claimed and finished the "
    "entry neither rewrites the task nor takes a lease") {
  StreamWorld w;
  const std::uint64_t id = w.submit("x");
  auto stale = w.read("node-a", 1);  // node-a reads, then stalls past claim_after
  REQUIRE(stale.size() == 1);
  auto claimed = w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(0), 10);
  REQUIRE(claimed.is_ok());
  REQUIRE(claimed->size() == 1);
  REQUIRE(w.stream.consumer.take(w.c, "node-b", *claimed).is_ok());
  REQUIRE(claimed->size() == 1);
  const redis::TaskUpkeep::Cap cap{w.stream.keys.cap_key("echo"), 1, id};
  auto b_lease = w.stream.upkeep.take_tokens(w.c, {}, cap, &claimed->front(), "node-b");
  REQUIRE(b_lease.is_ok());
  REQUIRE(b_lease->taken);
  REQUIRE(end_one(w.stream, w.c, claimed->front(), "node-b", "completed", "b", "", "", 5).value() ==
          Fenced::kDone);
  REQUIRE(w.c.command({"SCARD", w.stream.keys.cap_key("echo")})->integer == 0);

  // node-a wakes: its take is fenced (the entry is not pending for it), the task stays
  // completed, and its lease is refused, so none is left that no end would give back.
  REQUIRE(w.stream.consumer.take(w.c, "node-a", stale).is_ok());
  CHECK(stale.empty());
  const auto t = w.stream.producer.task(w.c, id);
  REQUIRE(t.is_ok());
  CHECK(t->state == "completed");
  CHECK(t->node == "node-b");
  auto a_lease = w.stream.upkeep.take_tokens(w.c, {}, cap, &claimed->front(), "node-a");
  REQUIRE(a_lease.is_ok());
  CHECK(a_lease->not_yours);
  CHECK_FALSE(a_lease->taken);
  CHECK(no_lease(w, id));
}

TEST_CASE(
    "idle entries of a node whose heartbeat key lives are not claimed, and once it expired they "
    "are") {
  StreamWorld w;
  for (int i = 0; i < 3; ++i) w.submit(std::to_string(i));
  auto held = w.read("node-a", 3);
  REQUIRE(held.size() == 3);
  for (const StreamEntry& e : held) age(w, "node-a", e.entry_id, 100000);
  // node-a's touches lagged (a stall of its beat or of Redis), but its key says it lives.
  REQUIRE(redis::TaskUpkeep::beat(w.c, "sp:", "node-a", "a-identity", std::chrono::seconds(60))
              .is_ok());
  auto none = w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 100);
  REQUIRE(none.is_ok());
  CHECK(none->empty());
  for (const StreamEntry& e : held) CHECK(owner_of(w, e.entry_id) == "node-a");
  // A node's own idle entries are a previous run's (it touches what it holds): it takes them.
  auto own = w.stream.consumer.claim_idle(w.c, "node-a", std::chrono::milliseconds(50000), 1);
  REQUIRE(own.is_ok());
  CHECK(own->size() == 1);
  // Its key gone: node-a is dead, and node-b claims the rest.
  REQUIRE(w.c.command({"DEL", "sp:node:node-a"}).is_ok());
  auto claimed = w.stream.consumer.claim_idle(w.c, "node-b", std::chrono::milliseconds(50000), 100);
  REQUIRE(claimed.is_ok());
  CHECK(claimed->size() == 2);
  for (const StreamEntry& e : *claimed) CHECK(owner_of(w, e.entry_id) == "node-b");
}
