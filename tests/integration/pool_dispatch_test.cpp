// An embedded Pool with its own dispatch function (PoolOptions::dispatch_function), real
// workers and the echo plugin: the function picks the worker, and one that throws is
// contained (the built-in strategy serves every task, and the pool says so once).
#include <catch2/catch.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_metrics.hpp>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

struct DispatchTestLog {
  std::shared_ptr<std::ostringstream> out = std::make_shared<std::ostringstream>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(
      "dispatch-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(*out));
  std::string text() const {
    logger->flush();
    return out->str();
  }
};

// Waits until every worker of the pool is ready (the function sees them all).
void wait_all_ready(Pool& pool, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + sandpool::testing::kPatience;
  while (std::chrono::steady_clock::now() < until) {
    std::size_t ready = 0;
    for (const WorkerInfo& w : pool.workers()) ready += w.state == "idle" || w.state == "busy";
    if (ready == n) return;
    std::this_thread::sleep_for(5ms);
  }
  FAIL("the workers never all became ready");
}

}  // namespace

TEST_CASE("an embedded pool's dispatch function picks the worker for each task") {
  std::atomic<int> calls{0};
  std::atomic<bool> on_loop_thread_only{true};
  std::atomic<std::thread::id> loop_thread{};
  PoolOptions o = pool_options("echo", 3);
  // Every task with tenant "big" to the highest slot, the others to slot 0.
  o.dispatch_function = [&](std::span<const WorkerView> workers,
                            const TaskView& t) -> std::optional<std::size_t> {
    ++calls;
    std::thread::id expected{};
    if (!loop_thread.compare_exchange_strong(expected, std::this_thread::get_id()) &&
        expected != std::this_thread::get_id()) {
      on_loop_thread_only = false;
    }
    const std::uint32_t want = t.tenant == "big" ? 2 : 0;
    for (std::size_t i = 0; i < workers.size(); ++i) {
      if (workers[i].slot == want && workers[i].has_room()) return i;
    }
    return std::nullopt;  // its worker is starting or full: wait for it
  };
  auto pool = make_pool(o);
  wait_all_ready(*pool, 3);
  std::map<std::uint32_t, std::int32_t> pid_of_slot;
  for (const WorkerInfo& w : pool->workers()) pid_of_slot[w.slot] = w.pid;
  std::set<std::int32_t> big, small;
  for (int i = 0; i < 10; ++i) {
    SubmitOptions so;
    so.tenant = i % 2 == 0 ? "big" : "";
    auto r = run(*pool, "echo", "x", so);
    REQUIRE(r.state == TaskState::kCompleted);
    (i % 2 == 0 ? big : small).insert(r.history.at(0).worker_pid);
  }
  CHECK(big == std::set<std::int32_t>{pid_of_slot.at(2)});
  CHECK(small == std::set<std::int32_t>{pid_of_slot.at(0)});
  CHECK(on_loop_thread_only);
  const PoolMetrics m = pool->metrics();
  CHECK(m.dispatch_function.calls == static_cast<std::uint64_t>(calls.load()));
  CHECK(m.dispatch_function.calls >= 10);
  CHECK(m.dispatch_function.errors == 0);
  CHECK(m.dispatch_function.time.count() == m.dispatch_function.calls);
}

TEST_CASE("an embedded pool's dispatch function that throws cannot stop the pool") {
  DispatchTestLog log;
  PoolOptions o = pool_options("echo", 2);
  o.logger = log.logger;
  o.dispatch = DispatchStrategy::kLeastLoaded;
  o.dispatch_function = [](std::span<const WorkerView>,
                           const TaskView& t) -> std::optional<std::size_t> {
    if (t.id % 2 == 0) throw std::runtime_error("even ids are not my problem");
    throw 42;  // not even a std::exception
  };
  auto pool = make_pool(o);
  std::vector<Ticket> ts;
  for (int i = 0; i < 40; ++i) ts.push_back(*pool->submit("echo", std::to_string(i)));
  for (const Ticket& t : ts) {
    REQUIRE(t.wait_for(sandpool::testing::kPatience));
    CHECK(t.wait().state == TaskState::kCompleted);
  }
  const PoolMetrics m = pool->metrics();
  CHECK(m.dispatch_function.errors == m.dispatch_function.calls);
  CHECK(m.dispatch_function.errors >= 40);
  const std::string text = log.text();
  CHECK(text.find("dispatch function threw") != std::string::npos);
  CHECK(text.find("least-loaded chose instead") != std::string::npos);
}
