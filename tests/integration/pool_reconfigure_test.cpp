// Pool::reconfigure on a live pool with real workers: a new launch spec rolls the workers
// while another thread keeps submitting (none lost; a larger max_payload only once no old
// worker is left); identity changes are refused and change nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <sandpool/pool/pool.hpp>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// Records the pids of workers that became ready, from the pool's events.
struct ReadyWorkers {
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::int32_t> pids;
  std::set<std::int32_t> exited;

  void hook(PoolOptions& o) {
    o.on_event = [this](const PoolEvent& e) {
      std::lock_guard lock(mu);
      if (e.kind == PoolEvent::Kind::kWorkerReady) pids.insert(e.pid);
      if (e.kind == PoolEvent::Kind::kWorkerExited) exited.insert(e.pid);
      cv.notify_all();
    };
  }
  // Waits until `n` workers outside `old` are ready and every one in `old` has exited.
  bool wait_fresh(const std::set<std::int32_t>& old, std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kPatience, [&] {
      std::size_t fresh = 0;
      for (auto pid : pids) fresh += old.count(pid) == 0;
      bool gone = true;
      for (auto pid : old) gone = gone && exited.count(pid) == 1;
      return fresh >= n && gone;
    });
  }
};

std::set<std::int32_t> pids_of(Pool& pool) {
  std::set<std::int32_t> out;
  for (const WorkerInfo& w : pool.workers()) out.insert(w.pid);
  return out;
}

}  // namespace

TEST_CASE("reconfigure with a new launch spec rolls the workers while submits go on") {
  ReadyWorkers ready;
  PoolOptions o = pool_options("echo", 2);
  o.max_payload = 1024;
  o.max_result = 1024;  // so the workers' region is sized by these two
  ready.hook(o);
  auto pool = make_pool(o);
  REQUIRE(ready.wait_fresh({}, 2));
  const std::set<std::int32_t> old = pids_of(*pool);
  REQUIRE(old.size() == 2);
  auto big = pool->submit("echo", std::string(2000, 'b'));
  REQUIRE_FALSE(big);
  CHECK(big.status().code() == Code::kTooLarge);

  std::atomic<bool> stop{false};
  std::vector<Ticket> tickets;
  std::string refusal;  // Catch2's assertions are for the test's thread only
  std::thread submitter([&] {
    while (!stop.load() || tickets.size() < 200) {
      auto t = pool->submit("echo", std::string(100, 'x'));
      if (!t) {  // 100 bytes stay under every max_payload this test sets
        refusal = t.status().to_string();
        return;
      }
      tickets.push_back(std::move(t).value());
    }
  });
  PoolOptions next = o;
  next.max_payload = 8192;  // the workers' region size and command line: a new launch spec
  next.max_result = 8192;
  auto report = pool->reconfigure(next);
  stop.store(true);
  submitter.join();
  CHECK(refusal.empty());
  REQUIRE(report);
  CHECK(report->rolling_restart);
  REQUIRE(ready.wait_fresh(old, 2));
  for (const Ticket& t : tickets) CHECK(t.wait().state == TaskState::kCompleted);

  // Every old worker is gone: now the larger payload is accepted and served.
  auto served = run(*pool, "echo", std::string(2000, 'b'));
  CHECK(served.state == TaskState::kCompleted);
  CHECK(served.result.size() == 2000);
  const PoolStats s = pool->stats();
  CHECK(s.restarts == 0);
  CHECK(s.dead_lettered == 0);
  CHECK(s.submitted == tickets.size() + 1);
  for (const WorkerInfo& w : pool->workers()) CHECK(w.restarts == 1);
}

TEST_CASE("reconfigure applies a new worker count and strategy without replacing anybody") {
  ReadyWorkers ready;
  PoolOptions o = pool_options("echo", 1);
  ready.hook(o);
  auto pool = make_pool(o);
  const std::set<std::int32_t> old = pids_of(*pool);
  PoolOptions next = o;
  next.workers = 2;
  next.dispatch = DispatchStrategy::kLeastLoaded;
  next.queue_capacity = 10;
  auto report = pool->reconfigure(next);
  REQUIRE(report);
  CHECK_FALSE(report->rolling_restart);
  CHECK(pool->stats().target_workers == 2);
  CHECK(pool->stats().dispatch == DispatchStrategy::kLeastLoaded);
  REQUIRE(ready.wait_fresh({}, 2));
  for (auto pid : old) CHECK(pids_of(*pool).count(pid) == 1);
  CHECK(run(*pool, "echo", "still").result == "still");
}

TEST_CASE(
    "reconfigure refuses another name or task_types, and a missing plugin, changing nothing") {
  auto pool = make_pool(pool_options("echo", 1));
  PoolOptions renamed = pool_options("echo", 3);
  renamed.name = "other";
  auto r1 = pool->reconfigure(renamed);
  REQUIRE_FALSE(r1);
  CHECK(r1.status().code() == Code::kInvalidArgument);
  PoolOptions retyped = pool_options("echo", 3);
  retyped.task_types = {"echo", "more"};
  CHECK(pool->reconfigure(retyped).status().code() == Code::kInvalidArgument);
  PoolOptions missing = pool_options("echo", 3);
  missing.plugin_path = "/nonexistent/libnothing.so";
  CHECK(pool->reconfigure(missing).status().code() == Code::kPlugin);
  CHECK(pool->stats().target_workers == 1);
  CHECK(run(*pool, "echo", "same").result == "same");
}

TEST_CASE("needs_new_pool names what a pool keeps for life, and nothing else") {
  PoolOptions started = pool_options("echo", 1);
  started.sandbox.namespaces.wanted = sandbox::NamespaceSet::all();
  CHECK_FALSE(needs_new_pool(started, started));

  PoolOptions more = started;  // what a rolling restart or a scale applies
  more.workers = 3;
  more.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  more.plugin_config_json = R"({"x": 1})";
  CHECK_FALSE(needs_new_pool(started, more));

  auto why = [&](auto change) {
    PoolOptions next = started;
    change(next);
    return needs_new_pool(started, next).value_or("");
  };
  CHECK(why([](PoolOptions& o) { o.task_types = {"echo", "more"}; }).find("task_types") == 0);
  CHECK(why([](PoolOptions& o) {
          o.sandbox.namespaces.wanted.remove(sandbox::Namespace::kNet);
        }).find("sandbox.namespaces") == 0);
  CHECK(why([](PoolOptions& o) {
          o.sandbox.namespaces.tmpfs_size = 1 << 20;
        }).find("sandbox.namespaces") == 0);
  CHECK(why([](PoolOptions& o) {
          o.sandbox.cgroup = sandbox::CgroupMode::kAuto;
        }).find("sandbox.cgroup") == 0);
  CHECK(why([](PoolOptions& o) { o.user = "daemon"; }).find("sandbox.user") == 0);
  // The plugin comes to the workers as fds, not through their view: moving it is launch
  // spec like the rest.
  CHECK(why([](PoolOptions& o) { o.plugin_path = "/elsewhere/libecho.so"; }).empty());

  // Without namespaces, the user is launch spec like the rest too.
  PoolOptions plain = pool_options("echo", 1);
  PoolOptions moved = plain;
  moved.user = "daemon";
  moved.plugin_path = "/elsewhere/libecho.so";
  CHECK_FALSE(needs_new_pool(plain, moved));
}

TEST_CASE("reconfigure refuses a change of namespaces, naming it, and the pool runs on") {
  auto pool = make_pool(pool_options("echo", 1));
  PoolOptions next = pool_options("echo", 1);
  next.sandbox.namespaces.wanted.add(sandbox::Namespace::kPid);
  auto r = pool->reconfigure(next);
  REQUIRE_FALSE(r);
  CHECK(r.status().code() == Code::kInvalidArgument);
  CHECK(r.status().message().find("sandbox.namespaces cannot change in place") !=
        std::string::npos);
  CHECK(run(*pool, "echo", "same").result == "same");
}

TEST_CASE("reconfigure refuses a CPU quota without per-worker cgroups, as a start does") {
  PoolOptions o = pool_options("echo", 1);
  o.sandbox.cgroup = sandbox::CgroupMode::kOff;
  auto pool = make_pool(o);
  PoolOptions next = o;
  next.sandbox.cpu_quota = 0.5;
  auto r = pool->reconfigure(next);
  REQUIRE_FALSE(r);
  CHECK(r.status().code() == Code::kInvalidArgument);
  CHECK(r.status().message().find("cpu_quota needs per-worker cgroups") != std::string::npos);
  CHECK(run(*pool, "echo", "same").result == "same");
}
