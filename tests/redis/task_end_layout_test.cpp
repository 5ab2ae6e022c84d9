// Where an end puts a task's attempts and its mark (finish_batch.lua, retry.lua, attempt.lua:
// `attempt:N` and `end:ENTRY` fields of the task's hash, one HSET per end), against a real
// redis-server: what `task ID` reads back, the layout older versions wrote (a list
// `P:task:ID:attempts` beside the hash, a count `ends`) still read and deleted with its task,
// an end of a task this node read touching its hash with that one HSET alone, and the runs of
// ends finish_batch.lua shares fields across writing each hash as a lone full end does.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis/redis_feeder_threads.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::redis::Fenced;
using sandpool::redis::StreamEntry;

namespace {

struct OnePool : testing::ScriptPool {
  using ScriptPool::ScriptPool;
  std::vector<StreamEntry> read(int n) {
    auto got = stream.consumer.read(c, "node-a", n, std::chrono::milliseconds(0)).value();
    REQUIRE(got.size() == static_cast<std::size_t>(n));
    return got;
  }
  // The calls of each command Redis ran since the last CONFIG RESETSTAT (INFO commandstats).
  std::map<std::string, std::int64_t> calls() {
    auto info = c.command({"INFO", "commandstats"});
    REQUIRE(info.is_ok());
    std::map<std::string, std::int64_t> out;
    std::size_t at = 0;
    const std::string& text = info->str;
    while ((at = text.find("cmdstat_", at)) != std::string::npos) {
      const auto colon = text.find(':', at);
      const auto n = text.find("calls=", colon) + 6;
      out[text.substr(at + 8, colon - at - 8)] = std::stoll(text.substr(n));
      at = colon;
    }
    return out;
  }
};

// An end as the node writes it: its attempts before told when the node knows them.
redis::TaskConsumer::EndWrite ended(const StreamEntry& e, std::vector<std::string> attempts) {
  redis::TaskConsumer::EndWrite w;
  w.entry = &e;
  w.state = "completed";
  w.result = "r";
  w.now_ms = 100;
  w.attempts = std::move(attempts);
  w.attempts_before = redis::TaskConsumer::attempts_known(e);
  return w;
}

}  // namespace

TEST_CASE("an ended task's attempts are fields of its hash, read back in order, no second key") {
  OnePool w;
  const auto ids = w.submit(1);
  auto got = w.read(1);
  // A first attempt failed and is retried (retry.lua), then the second ends the task.
  const std::vector<std::string> first = {"{\"number\":1}"};
  REQUIRE(w.stream.consumer.retry(w.c, got[0], "node-a", first, 3, {.base_ms = 0, .jitter = 0}, 50)
              .value() == redis::TaskConsumer::Retried::kDeferred);
  REQUIRE(w.stream.upkeep.move_due(w.c, 1000, 10).is_ok());
  got = w.read(1);
  CHECK(got[0].attempts == 1);
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {ended(got[0], {"{\"number\":2}"})}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  const std::string h = "sp:task:" + std::to_string(ids[0]);
  CHECK(w.integer({"EXISTS", h + ":attempts"}) == 0);
  const redis::StoredTask t = w.stream.producer.task(w.c, ids[0]).value();
  CHECK(t.state == "completed");
  CHECK(t.attempts == 2);
  CHECK(t.history == std::vector<std::string>{"{\"number\":1}", "{\"number\":2}"});
  CHECK(t.ends == 1);
  CHECK(w.c.command({"HGET", h, "attempt:2"})->str == "{\"number\":2}");
}

TEST_CASE(
    "an end of a task this node read runs one HSET on its hash, and no other command per "
    "end") {
  OnePool w;
  w.submit(3);
  auto got = w.read(3);
  std::vector<redis::TaskConsumer::EndWrite> ends;
  for (const StreamEntry& e : got) ends.push_back(ended(e, {"{\"number\":1}"}));
  REQUIRE(w.c.command({"CONFIG", "RESETSTAT"}).is_ok());
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", ends).value() ==
          std::vector<Fenced>(3, Fenced::kDone));
  const auto calls = w.calls();
  CHECK(calls.at("hset") == 3);
  for (const char* none : {"hmget", "hget", "rpush", "hincrby", "hexists", "srem", "hdel"}) {
    INFO(none);
    CHECK(calls.count(none) == 0);
  }
}

TEST_CASE("a task the previous layout wrote reads as before, ends on, and goes with its list") {
  OnePool w(/*keep=*/1);
  const auto ids = w.submit(2);
  auto got = w.read(2);
  // As e09570d's scripts left it: its first attempt in the list, counted in the hash; one
  // end counted (`ends`) before a replay.
  const std::string h = "sp:task:" + std::to_string(ids[0]);
  REQUIRE(w.c.command({"RPUSH", h + ":attempts", "{\"number\":1}"}).is_ok());
  REQUIRE(w.c.command({"HSET", h, "attempts", "1", "ends", "1"}).is_ok());
  got[0].attempts = 1;  // as take.lua would have answered
  auto before = w.stream.producer.task(w.c, ids[0]).value();
  CHECK(before.history == std::vector<std::string>{"{\"number\":1}"});
  CHECK(before.ends == 1);
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {ended(got[0], {"{\"number\":2}"})}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  const redis::StoredTask t = w.stream.producer.task(w.c, ids[0]).value();
  CHECK(t.history == std::vector<std::string>{"{\"number\":1}", "{\"number\":2}"});
  CHECK(t.attempts == 2);
  CHECK(t.ends == 2);  // the one counted before, and this one
  // Past keep_finished (1), the next end evicts it: hash, list and all.
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {ended(got[1], {"{\"number\":1}"})}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  CHECK(w.integer({"EXISTS", h}) == 0);
  CHECK(w.integer({"EXISTS", h + ":attempts"}) == 0);
}

TEST_CASE(
    "a waiter registered before the end is told by the end's batch, and its mark goes with the "
    "task") {
  OnePool w(/*keep=*/1);
  const auto ids = w.submit(2);
  auto got = w.read(2);
  REQUIRE(w.stream.producer.await_end(w.c, ids[0], std::chrono::milliseconds(1)).is_ok());
  REQUIRE(w.integer({"SISMEMBER", "sp:awaited", std::to_string(ids[0])}) == 1);
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {ended(got[0], {})}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  CHECK(w.c.command({"LRANGE", "sp:end:" + std::to_string(ids[0]), "0", "-1"})->elements.size() ==
        1);
  // Nobody waits on the other: no end list for it.
  REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {ended(got[1], {})}).value() ==
          std::vector<Fenced>{Fenced::kDone});
  CHECK(w.integer({"EXISTS", "sp:end:" + std::to_string(ids[1])}) == 0);
  // The first was evicted by the second's end (keep 1): its mark with it.
  CHECK(w.integer({"EXISTS", "sp:task:" + std::to_string(ids[0])}) == 0);
  CHECK(w.integer({"SCARD", "sp:awaited"}) == 0);
}

TEST_CASE("a task ended with a plain attempt keeps a compact hash, its attempt read as JSON") {
  OnePool w;
  const auto ids = w.submit(1);
  auto got = w.read(1);
  Attempt a;
  a.number = 1;
  a.worker_pid = 4242;
  a.started_ms = 1765000000000;
  a.ended_ms = a.started_ms + 3;
  REQUIRE(
      w.stream.consumer.end_all(w.c, "node-a", {ended(got[0], {redis::feeder::encode_stored(a)})})
          .value() == std::vector<Fenced>{Fenced::kDone});
  const std::string h = "sp:task:" + std::to_string(ids[0]);
  CHECK(w.c.command({"OBJECT", "ENCODING", h})->str == "listpack");
  CHECK(w.stream.producer.task(w.c, ids[0]).value().history ==
        std::vector<std::string>{redis::feeder::encode(a)});
}

TEST_CASE(
    "a batch of ends of every kind, in runs the script shares fields across, writes each task's "
    "hash as an end the script reads everything for does") {
  // The same end twice: in one mixed batch (compact runs: attempts known, one attempt, no
  // error; broken by a change of state or attempt number, by a full end and by a fenced one),
  // and, for a twin task, alone with its attempts before unknown (a full end, which reads
  // the hash): the two hashes alike but for their entries.
  OnePool w;
  constexpr int kEnds = 9;
  w.submit(2 * kEnds);
  auto got = w.read(2 * kEnds);
  got[7].attempts = got[kEnds + 7].attempts = 2;  // taken again after two attempts
  for (const int k : {7, kEnds + 7}) {
    REQUIRE(w.c.command({"HSET", "sp:task:" + std::to_string(got[k].task_id), "attempts", "2"})
                .is_ok());
  }
  const auto end_of = [&](int k) {
    redis::TaskConsumer::EndWrite e =
        ended(got[k], {"1 ok 42 1765000000000 " + std::to_string(k % kEnds)});
    e.result = "r" + std::to_string(k % kEnds);
    e.now_ms = 1000 + k % kEnds;
    // 0, 1, 7 and 8 compact (7 a run of its own: its attempt number); 2 a run of its own (its
    // state); the others full: an error, two attempts, a dead letter, no attempt.
    const int kind = k % kEnds;
    if (kind == 2) e.state = "failed";
    if (kind == 3) e.error = "boom";
    if (kind == 4) e.attempts.push_back("2 ok 42 1765000000000 1");
    if (kind == 5) {
      e.state = "dead_lettered";
      e.reason = "retries_exhausted";
      e.error = "no more";
    }
    if (kind == 6) e.attempts.clear();
    return e;
  };
  // node-b claimed the entry at 1 (in the first run): fenced, the rest of the run written.
  REQUIRE(w.c.command({"XCLAIM", w.stream.keys.stream_key(), redis::PoolKeys::kGroup, "node-b", "0",
                       got[1].entry_id})
              .is_ok());
  std::vector<redis::TaskConsumer::EndWrite> batch;
  for (int k = 0; k < kEnds; ++k) batch.push_back(end_of(k));
  batch.push_back(end_of(0));  // a second end of one entry: fenced
  std::vector<Fenced> want(kEnds + 1, Fenced::kDone);
  want[1] = want[kEnds] = Fenced::kNotYours;
  CHECK(w.stream.consumer.end_all(w.c, "node-a", batch).value() == want);
  for (int k = kEnds; k < 2 * kEnds; ++k) {
    if (k == kEnds + 1) continue;  // its twin was fenced
    redis::TaskConsumer::EndWrite alone = end_of(k);
    alone.attempts_before.reset();
    REQUIRE(w.stream.consumer.end_all(w.c, "node-a", {alone}).value() ==
            std::vector<Fenced>{Fenced::kDone});
  }
  const auto hash = [&](const StreamEntry& e) {
    auto r = w.c.command({"HGETALL", "sp:task:" + std::to_string(e.task_id)});
    REQUIRE(r.is_ok());
    std::map<std::string, std::string> out;
    for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) {
      const std::string& f = r->elements[i].str;
      out[f == "end:" + e.entry_id ? "end:ENTRY" : f] = r->elements[i + 1].str;
    }
    out.erase("entry");
    return out;
  };
  for (int k = 0; k < kEnds; ++k) {
    INFO("end " << k);
    const auto mixed = hash(got[k]), alone = hash(got[kEnds + k]);
    if (k == 1) {
      CHECK(mixed.at("state") == "running");
      CHECK(mixed.count("end:ENTRY") == 0);
      continue;
    }
    CHECK(mixed == alone);
    CHECK(mixed.at("end:ENTRY") == mixed.at("state"));
    CHECK(w.stream.producer.task(w.c, got[k].task_id).value().ends == 1);
  }
  CHECK(hash(got[7]).at("attempt:3") == "1 ok 42 1765000000000 7");
  CHECK(w.integer({"XLEN", w.stream.keys.letters}) == 2);
  CHECK(w.integer({"ZCARD", w.stream.keys.done}) == 2 * kEnds - 2);
}
