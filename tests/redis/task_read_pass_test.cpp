// A node's read pass (TaskConsumer::read) against a real redis-server: one XREADGROUP over
// every band, the higher bands first, never more than its count held, and what it read beyond
// its count handed back unread, in its place, for any node; no entry lost or read twice when
// nodes read at once.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis/task_stream_scripts.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::redis::Band;
using sandpool::redis::StreamEntry;
using sandpool::redis::StreamTask;
using sandpool::testing::PoolSides;
using sandpool::testing::RedisServer;

namespace {

struct ReadWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  PoolSides stream{"sp:", "echo"};
  ReadWorld() { REQUIRE(stream.upkeep.ensure_group(c).is_ok()); }

  // `n` tasks of priority `priority`, their payloads "<tag>0", "<tag>1"...: their ids in order.
  std::vector<std::uint64_t> submit(std::int32_t priority, const std::string& tag, int n) {
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      StreamTask t;
      t.type = "echo";
      t.payload = tag + std::to_string(i);
      t.options.priority = priority;
      auto id = stream.producer.submit(c, t, 1000);
      REQUIRE(id.is_ok());
      ids.push_back(id->id);
    }
    return ids;
  }
  std::vector<StreamEntry> read(const std::string& consumer, std::size_t n,
                                std::chrono::milliseconds block) {
    auto got = stream.consumer.read(c, consumer, n, block);
    REQUIRE(got.is_ok());
    return std::move(got).value();
  }
  // The entries pending for `consumer`, over every band.
  std::int64_t pending_for(const std::string& consumer) {
    std::int64_t n = 0;
    for (const std::string& s : stream.keys.streams) {
      auto r = c.command({"XPENDING", s, redis::PoolKeys::kGroup, "-", "+", "1000", consumer});
      REQUIRE(r.is_ok());
      n += static_cast<std::int64_t>(r->elements.size());
    }
    return n;
  }
};

std::vector<std::string> payloads(const std::vector<StreamEntry>& got) {
  std::vector<std::string> out;
  for (const StreamEntry& e : got) out.push_back(e.task.payload);
  return out;
}

std::vector<std::string> named(const std::string& tag, int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(tag + std::to_string(i));
  return out;
}

}  // namespace

TEST_CASE("a read takes the higher bands first and holds no more than its count") {
  ReadWorld w;
  w.submit(-5, "low", 10);
  w.submit(0, "normal", 10);
  w.submit(5, "high", 10);
  // Blocking or not: every band has more than the count waiting.
  const auto block = std::chrono::milliseconds(GENERATE(0, 200));
  auto first = w.read("node-a", 4, block);
  CHECK(payloads(first) == named("high", 0, 4));
  CHECK(w.pending_for("node-a") == 4);  // the lower bands' entries went back
  // Across the bands' edge: the rest of the high band, then the normal band's oldest.
  auto second = w.read("node-b", 8, block);
  std::vector<std::string> want = named("high", 4, 10);
  for (const std::string& p : named("normal", 0, 2)) want.push_back(p);
  CHECK(payloads(second) == want);
  CHECK(w.pending_for("node-b") == 8);
  // What went back twice is read in its place, once, by another node.
  auto rest = w.read("node-c", 100, block);
  want = named("normal", 2, 10);
  for (const std::string& p : named("low", 0, 10)) want.push_back(p);
  CHECK(payloads(rest) == want);
  CHECK(w.pending_for("node-c") == 18);
  CHECK(w.read("node-d", 100, std::chrono::milliseconds(0)).empty());
  // Each read's tasks run on its node; the ones handed back are still queued until read.
  REQUIRE(!rest.empty());
  CHECK(w.stream.producer.task(w.c, first[0].task_id)->node == "node-a");
  CHECK(w.stream.producer.task(w.c, rest.back().task_id)->node == "node-c");
}

TEST_CASE("entries read beyond the count go back as new entries when a node read past them") {
  ReadWorld w;
  w.submit(0, "normal", 6);
  const std::string& q0 = w.stream.keys.stream_key(0);
  // node-a's read got four, then node-b read one more before node-a handed the four back.
  auto a = w.c.command(
      {"XREADGROUP", "GROUP", redis::PoolKeys::kGroup, "node-a", "COUNT", "4", "STREAMS", q0, ">"});
  REQUIRE(a.is_ok());
  REQUIRE(a->elements.size() == 1);
  std::vector<std::string> back;
  for (const redis::Reply& e : a->elements[0].elements[1].elements)
    back.push_back(e.elements[0].str);
  REQUIRE(back.size() == 4);
  auto b = w.read("node-b", 1, std::chrono::milliseconds(0));
  REQUIRE(payloads(b) == named("normal", 4, 5));
  redis::lua::Take take{.streams = w.stream.keys.streams,
                        .prefix = w.stream.keys.prefix,
                        .pool = w.stream.keys.pool,
                        .consumer = "node-a"};
  for (const std::string& id : back) take.back[1].push_back(id);
  REQUIRE(redis::lua::run(w.c, take).is_ok());
  CHECK(w.pending_for("node-a") == 0);
  // Not read again from their old place (node-b's read is past it): added again, in order,
  // each task's hash naming its new entry.
  auto again = w.read("node-c", 10, std::chrono::milliseconds(0));
  std::vector<std::string> want = named("normal", 5, 6);
  for (const std::string& p : named("normal", 0, 4)) want.push_back(p);
  CHECK(payloads(again) == want);
  for (const StreamEntry& e : again) {
    CHECK(w.c.command({"HGET", w.stream.keys.task_key(e.task_id), "entry"})->str == e.entry_id);
  }
  CHECK(w.c.command({"XLEN", q0})->integer == 6);  // none doubled
}

TEST_CASE("nodes reading every band at once read each entry once, the higher bands first") {
  ReadWorld w;
  std::set<std::uint64_t> all;
  for (const std::int32_t p : {-2, 0, 2}) {
    for (const std::uint64_t id : w.submit(p, "p" + std::to_string(p) + "-", 60)) all.insert(id);
  }
  constexpr int kNodes = 3;
  constexpr std::size_t kCount = 4;
  std::vector<std::vector<StreamEntry>> got(kNodes);
  std::vector<bool> ordered(kNodes, true), bounded(kNodes, true);
  std::vector<std::thread> nodes;
  for (int n = 0; n < kNodes; ++n) {
    nodes.emplace_back([&, n] {
      auto c = redis::Connection::open(w.server.endpoint()).value();
      const std::string me = "node-" + std::to_string(n);
      for (int empty = 0; empty < 3;) {
        auto r = w.stream.consumer.read(c, me, kCount, std::chrono::milliseconds(n == 0 ? 0 : 20));
        if (!r || r->empty()) {
          ++empty;
          continue;
        }
        bounded[n] = bounded[n] && r->size() <= kCount;
        for (std::size_t i = 1; i < r->size(); ++i) {
          ordered[n] = ordered[n] && (*r)[i - 1].band >= (*r)[i].band;
        }
        for (StreamEntry& e : *r) got[n].push_back(std::move(e));
      }
    });
  }
  for (std::thread& t : nodes) t.join();
  std::map<std::uint64_t, int> times;
  for (int n = 0; n < kNodes; ++n) {
    CHECK(ordered[n]);
    CHECK(bounded[n]);
    CHECK(w.pending_for("node-" + std::to_string(n)) == static_cast<std::int64_t>(got[n].size()));
    for (const StreamEntry& e : got[n]) ++times[e.task_id];
  }
  CHECK(times.size() == all.size());  // none lost
  for (const auto& [id, n] : times) {
    INFO("task " << id);
    CHECK(n == 1);  // none read twice
    CHECK(all.count(id) == 1);
  }
}
