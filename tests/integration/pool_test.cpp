// A real Pool: real worker processes, real plugins, real rings.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::wait_running;

TEST_CASE("an echo task goes through a worker process and comes back") {
  auto pool = make_pool(pool_options("echo"));
  auto r = run(*pool, "echo", "hello");
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "hello");
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kOk);
  CHECK(r.history[0].worker_pid > 0);
}

TEST_CASE("the pool serves the task types its plugin declares") {
  auto pool = make_pool(pool_options("upper"));
  REQUIRE_FALSE(pool->task_types().empty());
  auto r = run(*pool, pool->task_types().front(), "MiXed case");
  CHECK(r.result == "MIXED CASE");
}

TEST_CASE("a thousand tasks from two threads all complete with their own results") {
  auto pool = make_pool(pool_options("echo"));
  std::vector<Ticket> tickets(1000);
  auto submit_range = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      auto t = pool->submit("echo", "payload-" + std::to_string(i));
      REQUIRE(t);
      tickets[i] = *t;
    }
  };
  std::thread other(submit_range, 500, 1000);
  submit_range(0, 500);
  other.join();
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(tickets[i].wait_for(kPatience));
    auto r = tickets[i].wait();
    REQUIRE(r.state == TaskState::kCompleted);
    CHECK(r.result == "payload-" + std::to_string(i));
  }
  pool->wait_idle();
  CHECK(pool->stats().completed == 1000);
}

TEST_CASE("payloads and results larger than the ring pass whole") {
  PoolOptions o = pool_options("echo", 1);
  o.ring_bytes = 16 * 1024;
  auto pool = make_pool(o);
  std::string big(1 << 20, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>('a' + i % 26);
  auto r = run(*pool, "echo", big);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == big);
}

TEST_CASE("a payload over max_payload is refused with a clear error") {
  PoolOptions o = pool_options("echo", 1);
  o.max_payload = 1000;
  auto pool = make_pool(o);
  auto t = pool->submit("echo", std::string(1001, 'x'));
  REQUIRE_FALSE(t);
  CHECK(t.status().code() == Code::kTooLarge);
  CHECK(t.status().message().find("max_payload") != std::string::npos);
}

TEST_CASE("an unknown task type is refused and names what the pool serves") {
  auto pool = make_pool(pool_options("echo", 1));
  auto t = pool->submit("resize-image", "x");
  REQUIRE_FALSE(t);
  CHECK(t.status().code() == Code::kInvalidArgument);
  CHECK(t.status().message().find("resize-image") != std::string::npos);
  CHECK(t.status().message().find("echo") != std::string::npos);
}

TEST_CASE("a full queue refuses with queue_full and takes tasks again once it drains") {
  PoolOptions o = pool_options("sleep", 1);
  o.concurrency = 1;
  o.queue_capacity = 3;
  auto pool = make_pool(o);
  std::vector<Ticket> accepted;
  Status refused = Status::ok();
  for (int i = 0; i < 10 && refused.is_ok(); ++i) {
    auto t = pool->submit("sleep", "50");
    if (t)
      accepted.push_back(*t);
    else
      refused = t.status();
  }
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.code() == Code::kQueueFull);
  CHECK(accepted.size() >= 3);
  CHECK(accepted.size() <= 4);  // 3 waiting + at most 1 already in the worker's ring
  pool->wait_idle();
  for (auto& t : accepted) CHECK(t.wait().state == TaskState::kCompleted);
  CHECK(pool->submit("sleep", "1"));
}

TEST_CASE("higher priority tasks are served first, FIFO within a level") {
  PoolOptions o = pool_options("sleep", 1);
  o.concurrency = 1;
  auto pool = make_pool(o);
  std::mutex mu;
  std::vector<std::string> order;
  // Hold the only worker until every task below is queued behind it.
  auto block = pool->submit("sleep", "600000");
  REQUIRE(block);
  wait_running(*block);
  for (auto [label, prio] : {std::pair{"low", 0}, {"high", 10}, {"mid", 5}, {"high2", 10}}) {
    SubmitOptions so;
    so.priority = prio;
    so.on_done = [&mu, &order, label = std::string(label)](const TaskResult&) {
      std::lock_guard lock(mu);
      order.push_back(label);
    };
    REQUIRE(pool->submit("sleep", "1", so));
  }
  REQUIRE(pool->stats().queued == 4);
  REQUIRE(block->cancel());
  pool->wait_idle();
  CHECK(block->wait().state == TaskState::kCancelled);
  std::lock_guard lock(mu);
  CHECK(order == std::vector<std::string>{"high", "high2", "mid", "low"});
}

TEST_CASE("progress updates reach the submitter before the result") {
  auto pool = make_pool(pool_options("progress", 1));
  std::mutex mu;
  std::vector<std::string> updates;
  bool done_seen_first = false;
  std::atomic<bool> done{false};
  SubmitOptions so;
  so.on_progress = [&](std::uint64_t, std::string_view d) {
    std::lock_guard lock(mu);
    if (done) done_seen_first = true;
    updates.emplace_back(d);
  };
  so.on_done = [&](const TaskResult&) { done = true; };
  auto r = run(*pool, "progress", "5", so);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "done");
  std::lock_guard lock(mu);
  CHECK_FALSE(done_seen_first);
  REQUIRE_FALSE(updates.empty());
  CHECK(updates.back() == "5/5");
}

TEST_CASE("every dispatch strategy serves tasks, and the strategy can change at run time") {
  auto s = GENERATE(DispatchStrategy::kRoundRobin, DispatchStrategy::kLeastLoaded,
                    DispatchStrategy::kRandom, DispatchStrategy::kAffinity,
                    DispatchStrategy::kLeastRss, DispatchStrategy::kByKey);
  PoolOptions o = pool_options("echo", 2);
  o.dispatch = s;
  auto pool = make_pool(o);
  std::vector<Ticket> ts;
  for (int i = 0; i < 200; ++i) {
    SubmitOptions so;
    so.key = "k" + std::to_string(i % 7);
    ts.push_back(*pool->submit("echo", std::to_string(i), so));
  }
  CHECK(pool->stats().dispatch == s);
  const DispatchStrategy next = s == DispatchStrategy::kLeastLoaded
                                    ? DispatchStrategy::kRoundRobin
                                    : DispatchStrategy::kLeastLoaded;
  REQUIRE(pool->set_strategy(next));
  CHECK(pool->stats().dispatch == next);
  for (int i = 0; i < 50; ++i) ts.push_back(*pool->submit("echo", "after"));
  pool->wait_idle();
  for (auto& t : ts) CHECK(t.wait().state == TaskState::kCompleted);
  CHECK(pool->stats().dispatch == next);
}

TEST_CASE("affinity sends every task with one key to the same worker process") {
  PoolOptions o = pool_options("echo", 2);
  o.dispatch = DispatchStrategy::kAffinity;
  auto pool = make_pool(o);
  std::set<std::int32_t> pids;
  for (int i = 0; i < 30; ++i) {
    SubmitOptions so;
    so.key = "tenant-42";
    auto r = run(*pool, "echo", "x", so);
    pids.insert(r.history.at(0).worker_pid);
  }
  CHECK(pids.size() == 1);
}

TEST_CASE("scale changes the number of workers at run time without failing a task") {
  PoolOptions o = pool_options("sleep", 2);
  o.concurrency = 1;  // one task per worker: four held tasks need four workers
  auto pool = make_pool(o);
  CHECK(pool->stats().target_workers == 2);
  std::vector<Ticket> ts;
  for (int i = 0; i < 20; ++i) ts.push_back(*pool->submit("sleep", "5"));
  REQUIRE(pool->scale(4));
  CHECK(pool->stats().target_workers == 4);
  // Four workers serve at once: four tasks that each wait for a cancel all run together.
  std::vector<Ticket> held;
  for (int i = 0; i < 4; ++i) held.push_back(*pool->submit("sleep", "600000"));
  for (const Ticket& t : held) wait_running(t);
  std::set<std::int32_t> busy;
  for (const WorkerInfo& w : pool->workers()) {
    if (w.in_flight > 0) busy.insert(w.pid);
  }
  CHECK(busy.size() == 4);
  for (const Ticket& t : held) REQUIRE(t.cancel());
  for (int i = 0; i < 20; ++i) ts.push_back(*pool->submit("sleep", "5"));
  REQUIRE(pool->scale(1));
  CHECK(pool->stats().target_workers == 1);
  for (int i = 0; i < 20; ++i) ts.push_back(*pool->submit("sleep", "1"));
  pool->wait_idle();
  for (auto& t : ts) {
    auto r = t.wait();
    CHECK(r.state == TaskState::kCompleted);
    CHECK(r.attempts() == 1);
  }
  // Drained workers leave; wait for the count to settle.
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (pool->workers().size() != 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  auto left = pool->workers();
  for (const auto& w : left)
    UNSCOPED_INFO("worker " << w.pid << " " << w.state << " in flight " << w.in_flight);
  CHECK(left.size() == 1);
  CHECK(pool->stats().workers == 1);
  CHECK(pool->stats().restarts == 0);
  for (const Ticket& t : held) CHECK(t.wait().state == TaskState::kCancelled);
}

TEST_CASE("close finishes the work it accepted and refuses more") {
  auto pool = make_pool(pool_options("sleep", 2));
  std::vector<Ticket> ts;
  for (int i = 0; i < 10; ++i) ts.push_back(*pool->submit("sleep", "10"));
  pool->close();
  for (auto& t : ts) CHECK(t.wait().state == TaskState::kCompleted);
  auto t = pool->submit("sleep", "1");
  REQUIRE_FALSE(t);
  CHECK(t.status().code() == Code::kClosed);
  CHECK(pool->stats().state == "closed");
}

TEST_CASE("a plugin's log calls and its stdout/stderr lines reach the manager's log") {
  auto out = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out);
  auto logger = std::make_shared<spdlog::logger>("chatty-test", sink);
  logger->set_level(spdlog::level::debug);
  PoolOptions o = pool_options("echo", 1);
  o.plugin_path = SANDPOOL_TEST_PLUGIN_DIR "/libchatty.so";
  o.logger = logger;
  auto pool = make_pool(o);
  auto r = run(*pool, "chatty", "payload-xyz");
  CHECK(r.state == TaskState::kCompleted);
  pool->close();  // the output pipe is drained before the worker is reaped
  logger->flush();
  const std::string log = out->str();
  INFO(log);
  CHECK(log.find("chatty: init says hello") != std::string::npos);
  CHECK(log.find("chatty: a warning from handle") != std::string::npos);
  CHECK(log.find("chatty stdout: payload-xyz") != std::string::npos);
  CHECK(log.find("chatty stderr: task " + std::to_string(r.id)) != std::string::npos);
}
