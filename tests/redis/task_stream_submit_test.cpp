// TaskProducer::submit_many against a real redis-server: a batch is one submit_batch script
// per 512 tasks, and writes each task exactly as submit() does, so a node of any version
// reads it.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <sandpool/redis/task_consumer.hpp>
#include <sandpool/redis/task_producer.hpp>
#include <sandpool/redis/task_upkeep.hpp>
#include "redis_server.hpp"
#include "redis_test_support.hpp"

using namespace sandpool;
using sandpool::redis::StreamTask;
using sandpool::testing::PoolSides;
using sandpool::testing::RedisServer;

namespace {

struct SubmitWorld {
  RedisServer server;
  redis::Connection c = redis::Connection::open(server.endpoint()).value();
  PoolSides stream{"sp:", "echo"};
  SubmitWorld() { REQUIRE(stream.upkeep.ensure_group(c).is_ok()); }

  std::vector<std::uint64_t> submit_many(const std::vector<StreamTask>& tasks,
                                         std::int64_t now_ms = 1000) {
    auto got = stream.producer.submit_many(c, tasks, now_ms);
    REQUIRE(got.is_ok());
    REQUIRE(got->size() == tasks.size());
    std::vector<std::uint64_t> ids;
    for (const auto& id : *got) {
      REQUIRE(id.is_ok());
      ids.push_back(id->id);
    }
    return ids;
  }
  std::map<std::string, std::string> hash(std::uint64_t id) {
    auto r = c.command({"HGETALL", "sp:task:" + std::to_string(id)});
    REQUIRE(r.is_ok());
    std::map<std::string, std::string> out;
    for (std::size_t i = 0; i + 1 < r->elements.size(); i += 2) {
      out[r->elements[i].str] = r->elements[i + 1].str;
    }
    return out;
  }
  // The fields of the entry `entry` of the band's stream, `id` and `idem` left out.
  std::vector<std::string> entry_fields(redis::Band band, const std::string& entry) {
    auto r = c.command({"XRANGE", stream.keys.stream_key(band), entry, entry});
    REQUIRE(r.is_ok());
    REQUIRE(r->elements.size() == 1);
    std::vector<std::string> out;
    const auto& f = r->elements[0].elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
      if (f[i].str == "id" || f[i].str == "idem") continue;
      out.push_back(f[i].str);
      out.push_back(f[i + 1].str);
    }
    return out;
  }
  std::uint64_t calls_of(const std::string& command) {
    auto r = c.command({"INFO", "commandstats"});
    REQUIRE(r.is_ok());
    const std::string tag = "cmdstat_" + command + ":calls=";
    const auto at = r->str.find(tag);
    return at == std::string::npos ? 0 : std::stoull(r->str.substr(at + tag.size()));
  }
};

StreamTask echo(const std::string& payload, const std::string& idem = "") {
  StreamTask t;
  t.type = "echo";
  t.payload = payload;
  t.options.idempotency_key = idem;
  return t;
}

}  // namespace

TEST_CASE("a batch submit writes each task's entry and hash as a submit of it does") {
  SubmitWorld w;
  StreamTask full = echo(std::string("bin\0ary", 7));
  full.options.priority = 5;
  full.options.timeout = std::chrono::milliseconds(1500);
  full.options.retries = 3;
  full.options.key = "k";
  full.options.tenant = "acme";
  StreamTask later = echo("later");
  later.options.not_before = std::chrono::system_clock::time_point(std::chrono::seconds(50));
  StreamTask plain = echo("plain");
  for (const StreamTask& t : {full, later, plain}) {
    INFO("payload " << t.payload);
    StreamTask one = t, batched = t;
    one.options.idempotency_key = "one-" + t.payload;
    batched.options.idempotency_key = "batch-" + t.payload;
    auto single = w.stream.producer.submit(w.c, one, 1000);
    REQUIRE(single.is_ok());
    const std::uint64_t id = w.submit_many({batched}).at(0);
    CHECK(id == single->id + 1);
    auto a = w.hash(single->id), b = w.hash(id);
    CHECK(a["idem_key"] == "sp:idem:" + one.options.idempotency_key);
    CHECK(b["idem_key"] == "sp:idem:" + batched.options.idempotency_key);
    CHECK(w.c.command({"GET", b["idem_key"]})->str == std::to_string(id));
    CHECK((b.count("tenant") ? b.at("tenant") : std::string()) == t.options.tenant);
    CHECK(b["attempts"] == "0");
    CHECK(b["pool"] == "echo");
    CHECK(b["submitted_ms"] == "1000");
    if (t.options.not_before) {
      // Scheduled: in the later set at its time, its fields packed in the hash (with its id).
      CHECK(b["state"] == "scheduled");
      CHECK(w.c.command({"ZSCORE", "sp:echo:later", std::to_string(id)})->str == "50000");
      for (auto* h : {&a, &b}) h->erase("deferred");
    } else {
      const redis::Band band = redis::band_of(t.options.priority);
      CHECK(w.entry_fields(band, a["entry"]) == w.entry_fields(band, b["entry"]));
      CHECK(b["state"] == "queued");
      // Band 0 (most tasks) is not written: a missing `band` reads as 0.
      if (band == 0)
        CHECK(b.count("band") == 0);
      else
        CHECK(b["band"] == std::to_string(band));
    }
    for (auto* h : {&a, &b}) {
      h->erase("entry");
      h->erase("idem_key");
    }
    CHECK(a == b);
  }
  // A node reads a batch's task as it reads a submit's: type, payload and options.
  auto read = w.stream.consumer.read(w.c, "node-a", 10, std::chrono::milliseconds(0));
  REQUIRE(read.is_ok());
  REQUIRE(read->size() == 4);  // full twice (band 1) first, then plain twice
  CHECK((*read)[1].task.payload == full.payload);
  CHECK((*read)[1].task.options.priority == 5);
  CHECK((*read)[1].task.options.timeout == std::chrono::milliseconds(1500));
  CHECK((*read)[1].task.options.retries == 3u);
  CHECK((*read)[1].task.options.key == "k");
  CHECK((*read)[1].task.options.tenant == "acme");
  CHECK((*read)[1].malformed.empty());
  CHECK((*read)[3].task.payload == "plain");
}

TEST_CASE(
    "a batch of tasks in runs that share all but their payloads writes each task as a submit of "
    "it does") {
  // submit_batch.lua's runs: consecutive tasks with no key and one payload field send what
  // they share once. Runs broken by a band, a tenant, a time, a key, a timeout: each task's
  // hash and entry still as a single submit writes them, the ids in order.
  SubmitWorld w;
  std::vector<StreamTask> tasks;
  for (const std::string& p :
       {std::string("a"), std::string("b"), std::string("bin\0ary", 7), std::string()}) {
    tasks.push_back(echo(p));
  }
  tasks.push_back(echo("keyed", "k1"));
  for (const std::string p : {"hi1", "hi2"}) {
    tasks.push_back(echo(p));
    tasks.back().options.priority = 5;
  }
  for (const std::string p : {"t1", "t2"}) {
    tasks.push_back(echo(p));
    tasks.back().options.tenant = "acme";
  }
  tasks.push_back(echo("later"));
  tasks.back().options.not_before = std::chrono::system_clock::time_point(std::chrono::seconds(50));
  tasks.push_back(echo("slow"));
  tasks.back().options.timeout = std::chrono::milliseconds(1500);
  tasks.push_back(echo("c"));
  std::vector<std::uint64_t> singles;
  for (StreamTask t : tasks) {
    if (!t.options.idempotency_key.empty()) t.options.idempotency_key += "-one";
    singles.push_back(w.stream.producer.submit(w.c, t, 1000).value().id);
  }
  const std::vector<std::uint64_t> ids = w.submit_many(tasks);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    INFO("task " << i << " payload " << tasks[i].payload);
    CHECK(ids[i] == ids[0] + i);
    auto a = w.hash(singles[i]), b = w.hash(ids[i]);
    if (a.count("entry")) {
      const redis::Band band = redis::band_of(tasks[i].options.priority);
      CHECK(w.entry_fields(band, a["entry"]) == w.entry_fields(band, b["entry"]));
    }
    for (auto* h : {&a, &b}) {
      for (const char* differs : {"entry", "idem_key", "deferred"}) h->erase(differs);
    }
    CHECK(a == b);
  }
  // Read back in order, each its payload (band 1 first).
  auto read = w.stream.consumer.read(w.c, "node-a", 100, std::chrono::milliseconds(0));
  REQUIRE(read.is_ok());
  std::vector<std::string> payloads;
  for (const auto& e : *read) {
    if (e.task_id >= ids[0]) payloads.push_back(e.task.payload);
  }
  CHECK(payloads == std::vector<std::string>{"hi1", "hi2", "a", "b", std::string("bin\0ary", 7), "",
                                             "keyed", "t1", "t2", "slow", "c"});
}

TEST_CASE("a batch of more tasks than one script takes is split, each script taking its ids once") {
  SubmitWorld w;
  std::vector<StreamTask> tasks;
  for (int i = 0; i < 1100; ++i) tasks.push_back(echo(std::to_string(i)));
  const std::uint64_t scripts = w.calls_of("evalsha"), incrs = w.calls_of("incrby");
  const std::vector<std::uint64_t> ids = w.submit_many(tasks);
  CHECK(w.calls_of("evalsha") - scripts == 3);  // 512 + 512 + 76
  CHECK(w.calls_of("incrby") - incrs == 3);
  CHECK(w.calls_of("incr") == 0);
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == redis::PoolKeys::kFirstId + i);
  auto read = w.stream.consumer.read(w.c, "node-a", 2000, std::chrono::milliseconds(0));
  REQUIRE(read.is_ok());
  REQUIRE(read->size() == 1100);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHECK((*read)[i].task_id == ids[i]);
    CHECK((*read)[i].task.payload == std::to_string(i));
  }
}

TEST_CASE("a batch's calls carry at most 16 MiB of payloads each, past their first task") {
  SubmitWorld w;
  // 7 + 7 MiB in the first call; the third would take it past 16: a second call. The task
  // larger than the bound goes alone, and the small one after it cannot join it.
  std::vector<StreamTask> tasks(3, echo(std::string(7u << 20, 'x')));
  tasks.push_back(echo(std::string(17u << 20, 'y')));
  tasks.push_back(echo("small"));
  const std::uint64_t scripts = w.calls_of("evalsha");
  const std::vector<std::uint64_t> ids = w.submit_many(tasks);
  CHECK(w.calls_of("evalsha") - scripts == 4);  // {7, 7}, {7}, {17}, {small}
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == redis::PoolKeys::kFirstId + i);
}

TEST_CASE("batches from two connections take distinct ids, as single submits beside them do") {
  SubmitWorld w;
  redis::Connection other = redis::Connection::open(w.server.endpoint()).value();
  std::set<std::uint64_t> seen;
  std::size_t made = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<StreamTask> batch(7, echo("x"));
    for (const auto id : w.submit_many(batch)) seen.insert(id);
    auto more = w.stream.producer.submit_many(other, batch, 1000);
    REQUIRE(more.is_ok());
    for (const auto& id : *more) seen.insert(id.value().id);
    seen.insert(w.stream.producer.submit(other, echo("y"), 1000).value().id);
    made += 15;
  }
  CHECK(seen.size() == made);
  CHECK(*seen.rbegin() == redis::PoolKeys::kFirstId + made - 1);
}

TEST_CASE(
    "an idempotency key in a batch answers the first task, made before it or earlier in the "
    "batch, and adds nothing") {
  SubmitWorld w;
  const std::uint64_t before = w.stream.producer.submit(w.c, echo("a", "order-1"), 1000).value().id;
  const std::vector<std::uint64_t> ids =
      w.submit_many({echo("b", "order-1"), echo("c", "order-2"), echo("d"), echo("e", "order-2")});
  CHECK(ids[0] == before);
  CHECK(ids[1] == before + 1);
  CHECK(ids[2] == before + 2);
  CHECK(ids[3] == ids[1]);
  CHECK(w.c.command({"XLEN", w.stream.keys.stream_key()})->integer == 3);
  CHECK(w.c.command({"GET", "sp:ids"})->str == std::to_string(before + 2));
  CHECK(w.hash(ids[1]).at("idem_key") == "sp:idem:order-2");
}

TEST_CASE("a batch sent after redis lost its scripts runs once") {
  SubmitWorld w;
  w.submit_many({echo("first")});  // the connection holds the script's SHA-1 from here
  REQUIRE(w.c.command({"SCRIPT", "FLUSH"}).is_ok());
  std::vector<StreamTask> tasks;
  for (int i = 0; i < 600; ++i) tasks.push_back(echo(std::to_string(i)));
  const std::vector<std::uint64_t> ids = w.submit_many(tasks);
  CHECK(ids.front() == redis::PoolKeys::kFirstId + 1);
  CHECK(ids.back() == redis::PoolKeys::kFirstId + 600);
  CHECK(w.c.command({"XLEN", w.stream.keys.stream_key()})->integer == 601);
}

TEST_CASE("submit and submit_many say which tasks an idempotency key matched") {
  SubmitWorld w;
  auto first = w.stream.producer.submit(w.c, echo("a", "order-1"), 1000);
  REQUIRE(first.is_ok());
  CHECK_FALSE(first->existing);
  auto again = w.stream.producer.submit(w.c, echo("a again", "order-1"), 1000);
  REQUIRE(again.is_ok());
  CHECK(again->id == first->id);
  CHECK(again->existing);
  // order-1 made before the batch; order-2 earlier in it; d has no key.
  auto got = w.stream.producer.submit_many(
      w.c, {echo("b", "order-1"), echo("c", "order-2"), echo("d"), echo("e", "order-2")}, 1000);
  REQUIRE(got.is_ok());
  std::vector<bool> existing;
  for (const auto& one : *got) {
    REQUIRE(one.is_ok());
    existing.push_back(one->existing);
  }
  CHECK(existing == std::vector<bool>{true, false, false, true});
  CHECK((*got)[0]->id == first->id);
  CHECK((*got)[3]->id == (*got)[1]->id);
}
