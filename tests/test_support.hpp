// Shared helpers for the process-level tests: where the built plugins and executables
// are, and a PoolOptions that uses them.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/pool/pool.hpp>

namespace sandpool::testing {

// The names of this process's threads, as the kernel keeps them (/proc/self/task/*/comm).
inline std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.push_back(name);
  }
  return names;
}

// The built example plugin lib<name>.so.
inline std::string plugin(const std::string& name) {
  return std::string(SANDPOOL_PLUGIN_DIR) + "/lib" + name + ".so";
}

// A pool of `workers` workers on plugin `name`, quick to retry, with the test build's
// worker host.
inline PoolOptions pool_options(const std::string& name, std::uint32_t workers = 2) {
  PoolOptions o;
  o.name = "test-" + name;
  o.plugin_path = plugin(name);
  o.worker_path = SANDPOOL_WORKER_PATH;
  o.workers = workers;
  o.retry.base = std::chrono::milliseconds(1);
  o.retry.max = std::chrono::milliseconds(20);
  // A loaded 2-core CI machine can starve an idle worker for a while; the heartbeat tests
  // set their own, tight, values.
  o.missed_heartbeats = 40;
  return o;
}

#ifdef SANDPOOL_TEST_PLUGIN_DIR
// A pool of `workers` workers on the test plugin `configurable` (type "configurable"): a task
// with payload "hold" runs its first attempt until it is cancelled or its worker dies, and
// completes (echoed) on a later attempt; other payloads are echoed.
inline PoolOptions holding_pool_options(std::uint32_t workers = 1) {
  PoolOptions o = pool_options("echo", workers);
  o.name = "test-configurable";
  o.plugin_path = std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/libconfigurable.so";
  return o;
}
#endif

// Generous bound for waits in tests: a loaded 2-core VM under a sanitizer is slow.
inline constexpr std::chrono::seconds kPatience{60};

// A started pool, or the test fails with the pool's error.
inline std::unique_ptr<Pool> make_pool(PoolOptions o) {
  auto p = Pool::create(std::move(o));
  if (!p) FAIL("Pool::create: " << p.status().to_string());
  return std::move(p).value();
}

// Submits one task and returns its final account (the test fails if it does not end).
inline TaskResult run(Pool& pool, const std::string& type, std::string payload,
                      SubmitOptions so = {}) {
  auto t = pool.submit(type, std::move(payload), std::move(so));
  if (!t) FAIL("submit: " << t.status().to_string());
  REQUIRE(t->wait_for(kPatience));
  return t->wait();
}

// Waits until the task is inside handle() on some worker.
inline void wait_running(const Ticket& t) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (t.state() != TaskState::kRunning && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(t.state() == TaskState::kRunning);
}

// SIGKILLs one live (idle or busy) worker of `pool` every 20 ms, at most `max_kills` times,
// until stop(): crashes raced against whatever the test does meanwhile.
class WorkerKiller {
 public:
  WorkerKiller(Pool& pool, int max_kills)
      : thread_([this, &pool, max_kills] {
          while (!stop_.load() && kills_.load() < max_kills) {
            for (const WorkerInfo& w : pool.workers()) {
              if (w.state == "idle" || w.state == "busy") {
                if (pool.kill_worker(w.pid, SIGKILL)) kills_.fetch_add(1);
                break;
              }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // paces the kills
          }
        }) {}
  WorkerKiller(const WorkerKiller&) = delete;
  WorkerKiller& operator=(const WorkerKiller&) = delete;
  ~WorkerKiller() { stop(); }
  // Stops the thread; returns how many workers it killed.
  int stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return kills_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> kills_{0};
  std::thread thread_;
};

}  // namespace sandpool::testing
