// RedisFeeder in the batch-entry layout (FeederOptions::layout, docs/redis-batch-layout.md,
// slice 2) against a real redis-server: nodes that run whole batches, each task ended once; a
// dead node's batch claimed with only its tasks with no end record run again; a failed task
// dead-lettered with its letter; what slice 2 does not run refused.
#include <signal.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/redis/batch_stream.hpp>
#include "feeder_test_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using redis::BatchStream;
using redis::RedisFeeder;

namespace {

// Node `name` of pool "work" in the batch layout (retries 0: slice 2 runs a task once).
redis::FeederOptions batch_node(const RedisServer& server, const std::string& name,
                                std::size_t capacity) {
  redis::FeederOptions o = node(server, name, capacity);
  o.layout = redis::Layout::kBatch;
  o.default_retries = 0;
  return o;
}

// `payloads` as tasks of `type`, submitted in batches of up to 512: their ids.
std::vector<std::uint64_t> submit_batches(redis::Connection& c, const BatchStream& batches,
                                          const std::string& type,
                                          const std::vector<std::string>& payloads) {
  std::vector<redis::StreamTask> tasks(payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    tasks[i].type = type;
    tasks[i].payload = payloads[i];
  }
  auto s = batches.submit(c, tasks, 1765000000000);
  if (!s) FAIL("BatchStream::submit: " << s.status().to_string());
  return s->ids;
}

std::vector<std::string> numbered(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back("t" + std::to_string(i));
  return out;
}

}  // namespace

TEST_CASE("two nodes of the batch layout run 5,000 tasks of 10 batches, each ended once") {
  FeederWorld w;
  const BatchStream batches(w.stream.keys);
  REQUIRE(batches.ensure_group(w.c).is_ok());
  const auto payloads = numbered(5000);
  const auto ids = submit_batches(w.c, batches, "echo", payloads);
  auto pool_a = make_pool(pool_options("echo", 1));
  auto pool_b = make_pool(pool_options("echo", 1));
  auto a = start_node(*pool_a, batch_node(w.server, "node-a", 4));
  auto b = start_node(*pool_b, batch_node(w.server, "node-b", 4));
  REQUIRE(eventually([&] { return a->stats().finished + b->stats().finished == 5000; }));
  const auto sa = a->stats(), sb = b->stats();
  CHECK(sa.batches_read + sb.batches_read == 10);
  CHECK(sa.batches_read > 0);
  CHECK(sb.batches_read > 0);
  CHECK(sa.fenced + sb.fenced == 0);
  // Each task ran once (the local pools' counts) and has its one end record, its own result.
  CHECK(pool_a->stats().completed + pool_b->stats().completed == 5000);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto t = batches.lookup(w.c, ids[i]);
    REQUIRE(t.is_ok());
    REQUIRE(t->has_value());
    CHECK((*t)->state == "completed");
    REQUIRE((*t)->end.has_value());
    CHECK((*t)->end->result == payloads[i]);
    CHECK((*t)->end->attempts == 1);
  }
  // Every batch acknowledged and deleted: nothing pending, nothing left to read.
  for (const std::string& key : batches.keys().streams) {
    CHECK(w.c.command({"XLEN", key})->integer == 0);
  }
  REQUIRE(eventually([&] { return a->stats().held + b->stats().held == 0; }));
}

TEST_CASE("a dead batch node's batch is claimed, and only its tasks with no end record run") {
  FeederWorld w;
  const BatchStream batches(w.stream.keys);
  REQUIRE(batches.ensure_group(w.c).is_ok());
  // Node a's workers are stopped: it holds the batch of 20 and ends none of them itself.
  auto pool_a = make_pool(stoppable_pool("echo", 2));
  signal_workers(*pool_a, 2, SIGSTOP);
  auto a = start_node(*pool_a, batch_node(w.server, "node-a", 4));
  const auto ids = submit_batches(w.c, batches, "echo", numbered(20));
  REQUIRE(eventually([&] { return a->stats().batches_read == 1; }));
  // Tasks 0..7 ended before node a died (their records written as node a's: the fence holds).
  auto read = w.c.command({"XPENDING", batches.keys().stream_key(0), "sandpool", "-", "+", "1"});
  REQUIRE(read->elements.size() == 1);
  redis::BatchEntry e;
  e.entry_id = read->elements[0].elements[0].str;
  e.band = 0;
  e.first = ids[0];
  e.tasks.resize(20);
  std::vector<redis::batch::EndRecord> before;
  for (std::uint32_t i = 0; i < 8; ++i) {
    redis::batch::EndRecord r;
    r.index = i;
    r.state = "completed";
    r.result = "ended before the death";
    r.attempts = 1;
    before.push_back(r);
  }
  REQUIRE(batches.end(w.c, e, "node-a", before, 1765000000000)->fenced == redis::Fenced::kDone);
  a->die();  // as a SIGKILL: its heartbeat stops, its batch stays pending for it
  CHECK(a->stats().finished == 0);
  signal_workers(*pool_a, 2, SIGCONT);  // what they end now, nobody writes to Redis

  auto pool_b = make_pool(pool_options("echo", 2));
  auto b = start_node(*pool_b, batch_node(w.server, "node-b", 4));
  REQUIRE(eventually([&] { return b->stats().finished == 12; }));
  CHECK(b->stats().batches_claimed == 1);
  CHECK(pool_b->stats().completed == 12);  // lost 0, dup 0: only the 12 with no record ran
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto t = batches.lookup(w.c, ids[i]);
    REQUIRE(t.is_ok());
    REQUIRE(t->has_value());
    CHECK((*t)->state == "completed");
    if (i < 8) {
      CHECK((*t)->end->result == "ended before the death");
      continue;
    }
    CHECK((*t)->end->result == "t" + std::to_string(i));
    REQUIRE((*t)->end->attempt_log.size() == 2);  // the lost one on node a, then node b's
    CHECK_THAT((*t)->end->attempt_log[0], Catch::Contains("claimed by node-b"));
  }
  CHECK(w.c.command({"XLEN", batches.keys().stream_key(0)})->integer == 0);  // acknowledged
  pool_a->close();
}

TEST_CASE("a batch task whose attempt fails ends dead_lettered, with its letter") {
  FeederWorld w;
  const BatchStream batches(w.stream.keys);
  REQUIRE(batches.ensure_group(w.c).is_ok());
  const auto ids = submit_batches(w.c, batches, "fail", {"broken input", "also broken"});
  auto pool = make_pool(pool_options("fail", 1));
  auto a = start_node(*pool, batch_node(w.server, "node-a", 2));
  REQUIRE(eventually([&] { return a->stats().finished == 2; }));
  auto t = batches.lookup(w.c, ids[0]);
  REQUIRE(t.is_ok());
  REQUIRE(t->has_value());
  CHECK((*t)->state == "dead_lettered");
  CHECK_THAT((*t)->end->error, Catch::Contains("broken input"));
  auto letters = w.stream.producer.dead_letters(w.c, 10);
  REQUIRE(letters.is_ok());
  REQUIRE(letters->size() == 2);
  std::vector<std::string> letter_ids;
  for (const auto& letter : *letters) {
    for (const auto& [k, v] : letter.fields) {
      if (k == "id") letter_ids.push_back(v);
      if (k == "reason") CHECK(v == "permanent");  // SP_FAIL
    }
  }
  CHECK_THAT(letter_ids, Catch::UnorderedEquals(std::vector<std::string>{std::to_string(ids[0]),
                                                                         std::to_string(ids[1])}));
}

TEST_CASE("what slice 2 of the batch layout does not run is refused, naming slice 3") {
  FeederWorld w;
  auto pool = make_pool(pool_options("echo", 1));
  redis::FeederOptions retries = batch_node(w.server, "node-a", 2);
  retries.default_retries = 3;
  auto f = RedisFeeder::start(*pool, retries);
  REQUIRE_FALSE(f.is_ok());
  CHECK_THAT(f.status().message(), Catch::Contains("retr") && Catch::Contains("slice 3"));

  redis::FeederOptions limited = batch_node(w.server, "node-a", 2);
  limited.limits.pool.tasks = 10;
  limited.limits.pool.per = std::chrono::seconds(1);
  f = RedisFeeder::start(*pool, limited);
  REQUIRE_FALSE(f.is_ok());
  CHECK_THAT(f.status().message(), Catch::Contains("rate limits") && Catch::Contains("slice 3"));

  // A task with retries is not submitted into a batch at all.
  const BatchStream batches(w.stream.keys);
  std::vector<redis::StreamTask> tasks(1);
  tasks[0].type = "echo";
  tasks[0].options.retries = 2;
  auto s = batches.submit(w.c, tasks, 1765000000000);
  REQUIRE_FALSE(s.is_ok());
  CHECK_THAT(s.status().message(), Catch::Contains("slice 3"));
}
