// The batch-entry layout (batch_stream.hpp, docs/redis-batch-layout.md) against a real
// redis-server: a batch through submit, read, end and lookup; the fences; the ack only once
// every task has a record; garbled bytes refused; a per-task reader that never runs a batch.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/redis/batch_stream.hpp>
#include <sandpool/redis/task_consumer.hpp>
#include "redis/batch_scripts.hpp"
#include "redis/task_stream_scripts.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using redis::BatchEntry;
using redis::BatchStream;
using redis::Fenced;
namespace batch = sandpool::redis::batch;

namespace {

constexpr std::chrono::milliseconds kNoWait{0};

// A pool ("sp:", "echo") with both layouts' groups made.
struct BatchPool : testing::ScriptPool {
  BatchStream batches{stream.keys};
  BatchPool() { REQUIRE(batches.ensure_group(c).is_ok()); }

  // `n` echo tasks of priority `priority`, payloads "p0", "p1", ...: their ids.
  std::vector<std::uint64_t> submit(std::size_t n, std::int32_t priority = 0) {
    std::vector<redis::StreamTask> tasks(n);
    for (std::size_t i = 0; i < n; ++i) {
      tasks[i].type = "echo";
      tasks[i].payload = "p" + std::to_string(i);
      tasks[i].options.priority = priority;
    }
    return batches.submit(c, tasks, 1765000000000).value().ids;
  }
  std::vector<BatchEntry> read(const std::string& consumer) {
    return batches.read(c, consumer, 16, kNoWait).value();
  }
  std::int64_t pending() {
    return integer({"XLEN", batches.keys().stream_key(0)}) == 0
               ? 0
               : c.command({"XPENDING", batches.keys().stream_key(0), "sandpool"})
                     .value()
                     .elements[0]
                     .integer;
  }
};

batch::EndRecord completed(std::uint32_t index, std::string result) {
  batch::EndRecord e;
  e.index = index;
  e.state = "completed";
  e.result = std::move(result);
  e.finished_ms = 1765000000100;
  e.attempts = 1;
  e.attempt_log = {"1 ok 42 1765000000000 1"};
  return e;
}

std::vector<batch::EndRecord> completed_range(std::uint32_t from, std::uint32_t to) {
  std::vector<batch::EndRecord> out;
  for (std::uint32_t i = from; i < to; ++i) out.push_back(completed(i, "r" + std::to_string(i)));
  return out;
}

}  // namespace

TEST_CASE("a batch goes through submit, read, end and lookup, each task found by its id") {
  BatchPool p;
  const auto ids = p.submit(600);  // two batches of band 0: 512 and 88
  const auto urgent = p.submit(2, 5);
  REQUIRE(ids.size() == 600);
  for (std::size_t i = 1; i < ids.size(); ++i) CHECK(ids[i] == ids[i - 1] + 1);
  CHECK(p.integer({"XLEN", p.batches.keys().stream_key(0)}) == 2);
  CHECK(p.batches.lookup(p.c, ids[599]).value()->state == "queued");

  const auto held = p.read("node-a");
  REQUIRE(held.size() == 3);
  CHECK(held[0].band == 1);  // the higher band first
  CHECK(held[0].first == urgent[0]);
  CHECK(held[1].first == ids[0]);
  REQUIRE(held[1].tasks.size() == 512);
  REQUIRE(held[2].tasks.size() == 88);
  CHECK(held[2].tasks[87].payload == "p599");
  CHECK(held[2].tasks[87].type == "echo");
  CHECK(held[1].ended == std::vector<bool>(512, false));
  const auto running = p.batches.lookup(p.c, ids[3]).value();
  REQUIRE(running);
  CHECK(running->state == "running");
  CHECK(running->node == "node-a");
  CHECK(running->pool == "echo");
  CHECK(running->index == 3);

  const auto first = p.batches.end(p.c, held[1], "node-a", completed_range(0, 256), 5).value();
  CHECK(first.fenced == Fenced::kDone);
  CHECK_FALSE(first.acked);
  CHECK(first.written == std::vector<bool>(256, true));
  const auto ended = p.batches.lookup(p.c, ids[255]).value();
  REQUIRE(ended);
  CHECK(ended->state == "completed");
  REQUIRE(ended->end);
  CHECK(ended->end->result == "r255");
  CHECK(ended->end->attempt_log == std::vector<std::string>{"1 ok 42 1765000000000 1"});
  CHECK(p.batches.lookup(p.c, ids[256]).value()->state == "running");

  const auto rest = p.batches.end(p.c, held[1], "node-a", completed_range(256, 512), 6).value();
  CHECK(rest.acked);
  CHECK(p.batches.end(p.c, held[2], "node-a", completed_range(0, 88), 7).value().acked);
  CHECK(p.batches.end(p.c, held[0], "node-a", completed_range(0, 2), 7).value().acked);
  CHECK(p.integer({"XLEN", p.batches.keys().stream_key(0)}) == 0);
  CHECK(p.integer({"XLEN", p.batches.keys().stream_key(1)}) == 0);
  CHECK(p.integer({"ZCARD", p.batches.keys().done}) == 3);
  CHECK(p.batches.lookup(p.c, ids[599]).value()->end->result == "r87");
  // A task of the per-task layout is no batch's, though its id follows them.
  const auto lone = p.ScriptPool::submit(1);
  CHECK_FALSE(p.batches.lookup(p.c, lone[0]).value().has_value());
}

TEST_CASE("an end is refused, writing nothing, after another consumer claimed the entry") {
  BatchPool p;
  const auto ids = p.submit(4);
  const auto held = p.read("node-a");
  REQUIRE(held.size() == 1);
  // node-a stalls; node-b claims its entry (as a claim of a dead node's entry would).
  const auto claimed = p.c.command(
      {"XCLAIM", p.batches.keys().stream_key(0), "sandpool", "node-b", "0", held[0].entry_id});
  REQUIRE(claimed.value().elements.size() == 1);
  const auto stale = p.batches.end(p.c, held[0], "node-a", completed_range(0, 4), 5).value();
  CHECK(stale.fenced == Fenced::kNotYours);
  CHECK(stale.written.empty());
  CHECK(p.integer({"EXISTS", p.batches.keys().ends_key(held[0].first)}) == 0);
  CHECK(p.batches.lookup(p.c, ids[0]).value()->state == "running");
  CHECK(p.pending() == 1);
  // node-b's take of the claimed entry answers what has ended (nothing), then its ends land.
  const auto take = redis::lua::run(
      p.c, redis::lua::BatchTake{.streams = p.batches.keys().streams,
                                 .prefix = "sp:",
                                 .pool = "echo",
                                 .consumer = "node-b",
                                 .entries = {{0, held[0].entry_id, held[0].first}}});
  REQUIRE(take.value().elements.size() == 1);
  CHECK(take.value().elements[0].str.empty());
  CHECK(p.batches.end(p.c, held[0], "node-b", completed_range(0, 4), 6).value().acked);
  CHECK(p.batches.lookup(p.c, ids[0]).value()->end->finished_ms == 1765000000100);
}

TEST_CASE(
    "a batch's entry is acked only once every task has a record, and a second record is skipped") {
  BatchPool p;
  const auto ids = p.submit(5);
  const auto held = p.read("node-a");
  REQUIRE(held.size() == 1);
  const auto four = p.batches.end(p.c, held[0], "node-a", completed_range(0, 4), 5).value();
  CHECK_FALSE(four.acked);
  CHECK(p.pending() == 1);
  CHECK(p.integer({"XLEN", p.batches.keys().stream_key(0)}) == 1);
  // Task 0 again (a duplicate end): skipped, its first record kept.
  auto again = completed_range(0, 1);
  again[0].result = "second";
  const auto dup = p.batches.end(p.c, held[0], "node-a", again, 6).value();
  CHECK(dup.written == std::vector<bool>{false});
  CHECK_FALSE(dup.acked);
  CHECK(p.batches.lookup(p.c, ids[0]).value()->end->result == "r0");
  // A claim now re-runs only task 4 (the end map says which ended).
  p.c.command(
         {"XCLAIM", p.batches.keys().stream_key(0), "sandpool", "node-b", "0", held[0].entry_id})
      .value();
  const auto take = redis::lua::run(
      p.c, redis::lua::BatchTake{.streams = p.batches.keys().streams,
                                 .prefix = "sp:",
                                 .pool = "echo",
                                 .consumer = "node-b",
                                 .entries = {{0, held[0].entry_id, held[0].first}}});
  REQUIRE(take.value().elements.size() == 1);
  CHECK(take.value().elements[0].str == std::string(1, '\x0f'));
  const auto last = p.batches.end(p.c, held[0], "node-b", completed_range(4, 5), 7).value();
  CHECK(last.written == std::vector<bool>{true});
  CHECK(last.acked);
  CHECK(p.pending() == 0);
  CHECK(p.integer({"XLEN", p.batches.keys().stream_key(0)}) == 0);
  CHECK(p.batches.lookup(p.c, ids[4]).value()->node == "node-b");
}

TEST_CASE(
    "a garbled batch entry is read as malformed and not taken, and garbled end records write "
    "nothing") {
  BatchPool p;
  const auto& keys = p.batches.keys();
  const std::string first = std::to_string(redis::PoolKeys::kFirstId + 7);
  std::vector<redis::StreamTask> one(1);
  one[0].type = "echo";
  const std::string blob = batch::pack_tasks(one.data(), 1).value();
  // Cut short, a count the entry does not say, another version, no tasks at all.
  p.c.command({"XADD", keys.stream_key(0), "*", "v", "1", "batch", first, "n", "1", "tasks",
               blob.substr(0, blob.size() - 1)})
      .value();
  p.c.command({"XADD", keys.stream_key(0), "*", "v", "1", "batch", first, "n", "2", "tasks", blob})
      .value();
  p.c.command({"XADD", keys.stream_key(0), "*", "v", "2", "batch", first, "n", "1", "tasks", blob})
      .value();
  p.c.command({"XADD", keys.stream_key(0), "*", "v", "1", "batch", "12", "n", "1"}).value();
  const auto held = p.read("node-a");
  REQUIRE(held.size() == 4);
  for (const BatchEntry& e : held) {
    INFO(e.malformed);
    CHECK_FALSE(e.malformed.empty());
    CHECK(e.tasks.empty());
  }
  CHECK(p.integer({"EXISTS", keys.batch_key(redis::PoolKeys::kFirstId + 7)}) == 0);
  CHECK(p.batches.discard(p.c, held[0], "node-a").value() == Fenced::kDone);
  CHECK(p.pending() == 3);

  // The end script checks the records it is sent before it writes anything.
  p.submit(2);
  const auto good = p.read("node-a");
  REQUIRE(good.size() == 1);
  std::string records;
  REQUIRE(batch::pack_end(completed(0, "ok"), records).is_ok());
  std::string past;  // index 5 of a batch of 2
  REQUIRE(batch::pack_end(completed(5, "x"), past).is_ok());
  std::string v3 = records;
  v3[4] = 3;
  for (const std::string& bad : {records + past, records.substr(0, records.size() - 1),
                                 records + std::string("\x01\x00", 2), v3}) {
    const auto r = redis::lua::run(p.c, redis::lua::BatchEnd{.stream = keys.stream_key(0),
                                                             .batch = keys.batch_key(good[0].first),
                                                             .ends = keys.ends_key(good[0].first),
                                                             .done = keys.done,
                                                             .consumer = "node-a",
                                                             .entry = good[0].entry_id,
                                                             .first = good[0].first,
                                                             .now_ms = 5,
                                                             .records = bad});
    CHECK(r.value().is_error());
    CHECK(p.integer({"EXISTS", keys.ends_key(good[0].first)}) == 0);
  }
  CHECK(p.batches.lookup(p.c, good[0].first).value()->state == "running");
}

TEST_CASE("a node of the per-task layout never runs a batch entry as a task") {
  BatchPool p;
  // A batch entry, as batch_submit.lua writes it, in a per-task stream (it never is: batches
  // have streams of their own; a per-task reader must still not misread one).
  std::vector<redis::StreamTask> one(1);
  one[0].type = "echo";
  one[0].payload = "batch";
  const std::string first = std::to_string(redis::PoolKeys::kFirstId + 100);
  p.c.command({"XADD", p.stream.keys.stream_key(0), "*", "v", "1", "batch", first, "n", "1",
               "tasks", batch::pack_tasks(one.data(), 1).value()})
      .value();
  const auto read =
      p.stream.consumer.read(p.c, "old-node", 10, std::chrono::milliseconds(0)).value();
  REQUIRE(read.size() == 1);
  CHECK_FALSE(read[0].malformed.empty());
  CHECK(p.integer({"EXISTS", "sp:task:" + first}) == 0);
  // And the per-task reader never sees the batch streams at all.
  p.submit(3);
  CHECK(p.stream.consumer.read(p.c, "old-node", 10, std::chrono::milliseconds(0)).value().empty());
}
