// RedisFeeder's answers to what goes wrong on a node (issue 36): a task its pool refuses, a
// cancel while a task waits in Redis, a drained pool, a dead node's entries under a backlog,
// many tasks due at once. Real nodes (a local Pool each, with real workers) and a real
// redis-server of the test's own.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "feeder_test_support.hpp"
#include "poold_test_support.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using redis::FeederOptions;
using redis::StreamTask;

namespace {

std::uint64_t submit(redis::Connection& c, const PoolSides& s, StreamTask t) {
  auto id = s.producer.submit(c, t, 1);
  REQUIRE(id.is_ok());
  return id->id;
}

StreamTask task(const std::string& type, const std::string& payload) {
  StreamTask t;
  t.type = type;
  t.payload = payload;
  return t;
}

std::string state_of(redis::Connection& c, const PoolSides& s, std::uint64_t id) {
  auto t = s.producer.task(c, id);
  return t ? t->state : "";
}

std::int64_t count(redis::Connection& c, const std::vector<std::string>& command) {
  auto r = c.command(command);
  REQUIRE(r);
  return r->integer;
}

bool ended(redis::Connection& c, const PoolSides& s, std::uint64_t id) {
  auto t = s.producer.task(c, id);
  return t && (t->state == "completed" || t->state == "dead_lettered" || t->state == "cancelled");
}

}  // namespace

// Submitted by a node whose config accepts it (or added by a plain XADD), refused by this
// node's pool: before, it went back to the stream's end for ever and paused the reader 1 s
// each time.
TEST_CASE_METHOD(FeederWorld,
                 "a task the node's pool refuses is dead-lettered rejected after a few refusals") {
  PoolOptions po = pool_options("echo", 2);
  po.max_timeout = std::chrono::seconds(1);  // lowered below what the task asks
  po.max_payload = 1024;
  auto pool = make_pool(po);
  auto feeder = start_node(*pool, node(server, "node-a", 4));
  const auto [poison, why] = GENERATE(table<StreamTask, std::string>({
      {task("nosuch", "x"), "unknown task type 'nosuch'"},
      {[] {
         StreamTask t = task("echo", "x");
         t.options.timeout = std::chrono::milliseconds(5000);
         return t;
       }(),
       "max_timeout"},
      {task("echo", std::string(2048, 'p')), "exceeds max_payload"},
  }));
  INFO(why);
  std::vector<std::uint64_t> poisons;
  for (int i = 0; i < 3; ++i) poisons.push_back(submit(c, stream, poison));
  std::vector<std::uint64_t> good;
  for (int i = 0; i < 50; ++i) good.push_back(submit(c, stream, task("echo", std::to_string(i))));
  REQUIRE(eventually([&] {
    for (std::uint64_t id : poisons) {
      if (!ended(c, stream, id)) return false;
    }
    return feeder->stats().finished == good.size() + poisons.size();  // a rejection is an end
  }));
  for (std::uint64_t id : poisons) {
    auto t = stream.producer.task(c, id);
    REQUIRE(t);
    CHECK(t->state == "dead_lettered");
    CHECK(t->reason == "rejected");
    CHECK(t->error.find(why) != std::string::npos);
    CHECK(t->attempts == 0);  // never ran
  }
  CHECK(c.command({"XLEN", "sp:work:dlq"})->integer == static_cast<std::int64_t>(poisons.size()));
  CHECK(c.command({"XLEN", stream.keys.stream_key()})->integer == 0);
}

// Node a's pool refuses the task (a lowered max_timeout); node b would run it but is busy
// (its one place holds a task whose worker is stopped). Before, a refused the task five times
// within a few round trips and dead-lettered it `rejected`, though b would have run it.
TEST_CASE_METHOD(FeederWorld,
                 "a task one node refuses waits, read by it once a heartbeat at most, and runs "
                 "on another node once that node has room") {
  auto pool_b = make_pool(stoppable_pool("sleep", 1));
  signal_workers(*pool_b, 1, SIGSTOP);
  auto b = start_node(*pool_b, node(server, "node-b", 1));
  const std::uint64_t blocker = submit(c, stream, task("sleep", "10"));
  REQUIRE(eventually([&] { return b->stats().held == 1; }));
  PoolOptions po = pool_options("sleep", 1);
  po.max_timeout = std::chrono::seconds(1);
  auto pool_a = make_pool(po);
  const redis::FeederOptions oa = node(server, "node-a", 4);
  auto a = start_node(*pool_a, oa);
  StreamTask long_one = task("sleep", "10");
  long_one.options.timeout = std::chrono::milliseconds(5000);  // over a's max_timeout
  const auto began = std::chrono::steady_clock::now();
  const std::uint64_t id = submit(c, stream, long_one);
  const std::string hash = "sp:task:" + std::to_string(id);
  const auto refusals = [&] {
    auto r = c.command({"HGET", hash, "refusals"});
    return r && !r->str.empty() ? std::stoll(r->str) : 0;
  };
  const std::int64_t kMany = 2 * redis::TaskConsumer::kMaxRefusals;
  REQUIRE(eventually([&] { return refusals() >= kMany; }));
  // Each refusal deferred it a heartbeat: a reads it once per refusal, no faster.
  CHECK(std::chrono::steady_clock::now() - began >= (kMany - 1) * oa.heartbeat);
  CHECK(a->stats().read <= static_cast<std::uint64_t>(refusals()) + 1);
  CHECK_FALSE(ended(c, stream, id));    // b lives and has not refused it
  signal_workers(*pool_b, 1, SIGCONT);  // b's place frees: it reads the task when it is back
  REQUIRE(eventually([&] { return ended(c, stream, id) && ended(c, stream, blocker); }));
  auto t = stream.producer.task(c, id);
  REQUIRE(t);
  CHECK(t->state == "completed");
  CHECK(t->node == "node-b");
  CHECK(a->stats().finished == 0);
  CHECK(count(c, {"XLEN", "sp:work:dlq"}) == 0);
}

TEST_CASE_METHOD(FeederWorld,
                 "a task every live node refuses ends rejected after five refusals in all") {
  PoolOptions po = pool_options("sleep", 1);
  po.max_timeout = std::chrono::seconds(1);
  auto pool_a = make_pool(po);
  auto pool_b = make_pool(po);
  auto a = start_node(*pool_a, node(server, "node-a", 2));
  auto b = start_node(*pool_b, node(server, "node-b", 2));
  StreamTask long_one = task("sleep", "10");
  long_one.options.timeout = std::chrono::milliseconds(5000);
  const std::uint64_t id = submit(c, stream, long_one);
  REQUIRE(eventually([&] { return ended(c, stream, id); }));
  auto t = stream.producer.task(c, id);
  REQUIRE(t);
  CHECK(t->state == "dead_lettered");
  CHECK(t->reason == "rejected");
  CHECK_THAT(t->error,
             Catch::Contains("refused by every live node") && Catch::Contains("max_timeout"));
  const auto n = std::stoll(c.command({"HGET", "sp:task:" + std::to_string(id), "refusals"})->str);
  CHECK(n >= redis::TaskConsumer::kMaxRefusals);
  CHECK(count(c, {"XLEN", "sp:work:dlq"}) == 1);
  // The rejection is one end (counted once its answer is read: after Redis shows it).
  CHECK(eventually([&] { return a->stats().finished + b->stats().finished == 1; }));
}

// The node beats every 30 s, so its beat (which cancels what it runs when asked) does not
// come between the cancel and the attempt's end once its first round is done (a first round
// still under way at the cancel cancelled the task before it started: 3 runs in 12 once):
// the flag alone must stop the retries.
TEST_CASE_METHOD(
    FeederWorld,
    "a task cancelled while its attempt runs is not retried after that attempt fails") {
  auto pool = make_pool(stoppable_pool("flaky", 1));  // attempt 1 asks for a retry, 2 succeeds
  signal_workers(*pool, 1, SIGSTOP);
  FeederOptions o = node(server, "node-a", 1);
  o.heartbeat = std::chrono::seconds(30);
  o.claim_after = std::chrono::seconds(90);
  o.retry.base = o.retry.max = std::chrono::milliseconds(1);
  auto feeder = start_node(*pool, o);
  REQUIRE(eventually([&] { return feeder->stats().beats >= 1; }));
  StreamTask t = task("flaky", "x");
  t.options.retries = 3;
  const std::uint64_t id = submit(c, stream, t);
  REQUIRE(eventually([&] { return state_of(c, stream, id) == "running"; }));
  auto cancelled = stream.producer.cancel(c, id, 1);
  REQUIRE(cancelled);
  CHECK(cancelled->asked);
  signal_workers(*pool, 1, SIGCONT);  // attempt 1 fails now and may be retried
  REQUIRE(eventually([&] { return ended(c, stream, id); }));
  auto account = stream.producer.task(c, id);
  REQUIRE(account);
  CHECK(account->state == "cancelled");
  CHECK(account->attempts == 1);
  CHECK(count(c, {"ZCARD", "sp:work:later"}) == 0);
}

TEST_CASE_METHOD(FeederWorld,
                 "a task asked to cancel ends cancelled when it would go back to the stream") {
  REQUIRE(stream.upkeep.ensure_group(c).is_ok());
  const std::uint64_t first = submit(c, stream, task("echo", "a"));
  const std::uint64_t second = submit(c, stream, task("echo", "b"));
  auto read = stream.consumer.read(c, "n", 2, std::chrono::milliseconds(0));
  REQUIRE(read);
  REQUIRE(read->size() == 2);
  REQUIRE(stream.consumer.take(c, "n", *read).is_ok());
  for (std::uint64_t id : {first, second}) REQUIRE(stream.producer.cancel(c, id, 1)->asked);
  // Handed back (the node stops), and throttled (over a rate limit) then due: neither runs
  // again.
  CHECK(stream.consumer.release(c, (*read)[0], "n").value() == redis::Fenced::kDone);
  redis::TaskUpkeep::Bucket bucket;
  bucket.key = stream.keys.rate_key("pool", "");
  const auto due = stream.upkeep.throttle(c, (*read)[1], "n", bucket, 5, 0);
  REQUIRE(due);
  REQUIRE(due->has_value());
  CHECK(stream.upkeep.move_due(c, **due, 100).value() == 1);
  for (std::uint64_t id : {first, second}) CHECK(state_of(c, stream, id) == "cancelled");
  CHECK(count(c, {"XLEN", stream.keys.stream_key()}) == 0);
  for (std::uint64_t id : {first, second}) CHECK(stream.producer.task(c, id).value().ends == 1);
}

// Before, a drained node read an entry every second, was refused by its pool and pushed the
// entry to the stream's end.
TEST_CASE_METHOD(FeederWorld, "a drained node reads nothing, and reads again once resumed") {
  auto pool_a = make_pool(pool_options("echo", 2));
  pool_a->drain();
  auto a = start_node(*pool_a, node(server, "node-a", 4));
  auto pool_b = make_pool(pool_options("echo", 1));
  auto b = start_node(*pool_b, node(server, "node-b", 1));
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(submit(c, stream, task("echo", std::to_string(i))));
  REQUIRE(eventually([&] { return b->stats().finished == ids.size(); }));
  CHECK(a->stats().read == 0);
  CHECK(a->stats().released == 0);
  CHECK(b->stats().released == 0);
  b.reset();  // a alone now
  pool_a->resume();
  const std::uint64_t late = submit(c, stream, task("echo", "late"));
  REQUIRE(eventually([&] { return ended(c, stream, late); }));
  CHECK(a->stats().finished == 1);
}

// Node a runs a backlog of 1 s tasks in its two places; the reader refills a freed place
// within a round trip, so before, its beat (claiming only into a free place) rarely claimed
// the dead node's tasks until the backlog was gone.
TEST_CASE_METHOD(FeederWorld,
                 "a dead node's tasks are claimed and run while the live node has a backlog") {
  auto pool_dead = make_pool(stoppable_pool("sleep", 2));
  signal_workers(*pool_dead, 2, SIGSTOP);
  auto dead = start_node(*pool_dead, node(server, "node-dead", 2));
  StreamTask urgent = task("sleep", "10");
  urgent.options.priority = 5;
  const std::vector<std::uint64_t> orphans = {submit(c, stream, urgent), submit(c, stream, urgent)};
  REQUIRE(eventually([&] { return dead->stats().held == 2; }));
  dead->die();
  const int kBacklog = 40;
  for (int i = 0; i < kBacklog; ++i) submit(c, stream, task("sleep", "1000"));
  auto pool = make_pool(pool_options("sleep", 2));
  auto live = start_node(*pool, node(server, "node-live", 2));
  REQUIRE(eventually([&] { return ended(c, stream, orphans[0]) && ended(c, stream, orphans[1]); }));
  // Ran with most of the backlog still waiting in the stream.
  CHECK(live->stats().finished < 2 + kBacklog / 2);
  CHECK(count(c, {"XLEN", stream.keys.stream_key(0)}) > kBacklog / 2);
  for (std::uint64_t id : orphans) {
    auto t = stream.producer.task(c, id);
    CHECK(t->state == "completed");
    CHECK(t->node == "node-live");
  }
  CHECK(live->stats().claimed == 2);
  signal_workers(*pool_dead, 2, SIGCONT);
  pool_dead->close();
}

// 10,000 scheduled tasks fall due at once. The node beats every 2 s; before, a beat moved 100
// of them (100 beats: over 3 minutes).
TEST_CASE_METHOD(
    FeederWorld,
    "ten thousand tasks due at once are back in the stream within a heartbeat or two") {
  const int kDue = 10000;
  std::vector<StreamTask> tasks(kDue, task("echo", "x"));
  for (StreamTask& t : tasks) REQUIRE(t.options.set_not_before_ms(2));  // due at once: epoch + 2 ms
  for (std::size_t at = 0; at < tasks.size(); at += 1000) {
    std::vector<StreamTask> chunk(tasks.begin() + at, tasks.begin() + at + 1000);
    auto ids = stream.producer.submit_many(c, chunk, 1);  // submitted "at" ms 1: scheduled
    REQUIRE(ids);
  }
  REQUIRE(count(c, {"ZCARD", "sp:work:later"}) == kDue);
  auto pool = make_pool(pool_options("echo", 2));
  FeederOptions o = node(server, "node-a", 4);
  o.heartbeat = std::chrono::seconds(2);
  o.claim_after = std::chrono::seconds(6);
  const auto began = std::chrono::steady_clock::now();
  auto a = start_node(*pool, o);
  REQUIRE(eventually([&] { return count(c, {"ZCARD", "sp:work:later"}) == 0; }));
  // The first beat moves them all (the second at the latest, on a machine that lags).
  CHECK(std::chrono::steady_clock::now() - began < 2 * o.heartbeat + std::chrono::seconds(1));
  REQUIRE(eventually([&] { return a->stats().finished == kDue; }));
}

// The pool's workers cannot start any more (its plugin is gone): after max_init_failures it is
// failed, and before, what it had read was dead-lettered crash_loop in Redis though it never
// ran. Handed back, it runs on node b.
TEST_CASE_METHOD(
    FeederWorld,
    "a node whose pool fails hands back the tasks it had read, and another runs them") {
  TempDir dir;
  const std::filesystem::path plugin = dir.path / "libsleep.so";
  std::filesystem::copy_file(pool_options("sleep").plugin_path, plugin);
  PoolOptions po = stoppable_pool("sleep", 1);
  po.plugin_path = plugin.string();
  po.max_init_failures = 2;
  po.crash_backoff_base = po.crash_backoff_max = std::chrono::milliseconds(10);
  auto pool_a = make_pool(po);
  signal_workers(*pool_a, 1, SIGSTOP);
  auto a = start_node(*pool_a, node(server, "node-a", 3));
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(submit(c, stream, task("sleep", "10")));
  REQUIRE(eventually([&] { return a->stats().held == 3; }));
  std::filesystem::remove(plugin);
  signal_workers(*pool_a, 1, SIGKILL);  // its replacements cannot load the plugin
  REQUIRE(eventually([&] { return pool_a->stats_snapshot().state == "failed"; }));
  auto pool_b = make_pool(pool_options("sleep", 1));
  auto b = start_node(*pool_b, node(server, "node-b", 1));
  REQUIRE(eventually([&] {
    for (std::uint64_t id : ids) {
      if (!ended(c, stream, id)) return false;
    }
    return true;
  }));
  for (std::uint64_t id : ids) {
    auto t = stream.producer.task(c, id);
    INFO("task " << id << ": " << t->error);
    CHECK(t->state == "completed");
    CHECK(t->node == "node-b");
  }
  CHECK(count(c, {"XLEN", "sp:work:dlq"}) == 0);
}
