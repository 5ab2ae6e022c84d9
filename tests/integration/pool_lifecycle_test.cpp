// A real Pool at the edges of its life: submits racing close(), workers that ignore Stop, a
// pool that fails while another thread submits (a TSan case: this executable runs under
// TSan in make check).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;

namespace {

PoolOptions configurable_options(const std::string& config_json, std::uint32_t workers = 2) {
  PoolOptions o = pool_options("echo", workers);
  o.name = "configurable";
  o.plugin_path = std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/libconfigurable.so";
  o.plugin_config_json = config_json;
  return o;
}

// Runs fn on a thread and returns whether it finished within kPatience.
template <typename Fn>
bool finishes(Fn fn) {
  auto done = std::async(std::launch::async, std::move(fn));
  return done.wait_for(kPatience) == std::future_status::ready;
}

}  // namespace

TEST_CASE("a task accepted while the pool closes is run, one refused is told so") {
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    auto pool = make_pool(pool_options("echo", 1));
    // Each submitter submits until it is refused, and says so once its first task is in: the
    // pool closes only then, so every round has tasks accepted and submits refused. One that
    // is kHeadStart tasks ahead waits for the close to begin before it goes on (else the
    // first thread piles up tens of thousands of tasks for the one worker while the others
    // start: 27-68 s under TSan), so the submits still race the close.
    constexpr std::size_t kHeadStart = 64;
    std::atomic<int> submitting{0};
    std::atomic<bool> closing{false};
    std::vector<Ticket> accepted[3];
    std::optional<Code> refused[3];
    std::vector<std::thread> submitters;
    for (int i = 0; i < 3; ++i) {
      submitters.emplace_back([&, &mine = accepted[i], &why = refused[i]] {
        for (;;) {
          auto t = pool->submit("echo", "x");
          if (!t) {
            why = t.status().code();
            return;
          }
          mine.push_back(std::move(t).value());
          if (mine.size() == 1) ++submitting;
          while (mine.size() >= kHeadStart && !closing.load()) std::this_thread::yield();
        }
      });
    }
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (submitting.load() < 3 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(100us);
    }
    CHECK(submitting.load() == 3);  // then closed all the same, so the threads end
    closing = true;
    REQUIRE(finishes([&] { pool->close(); }));
    for (auto& s : submitters) s.join();
    for (int i = 0; i < 3; ++i) {
      CHECK(refused[i] == Code::kClosed);
      for (const Ticket& t : accepted[i]) {
        REQUIRE(t.wait_for(kPatience));  // accepted means it ends
        CHECK(t.wait().state == TaskState::kCompleted);
      }
    }
  }
}

TEST_CASE("a worker whose shutdown hook never returns is killed after stop_timeout") {
  PoolOptions o = configurable_options(R"({"hang_shutdown": true})");
  o.stop_timeout = 300ms;
  auto pool = make_pool(o);
  REQUIRE(testing::run(*pool, "configurable", "hi").state == TaskState::kCompleted);
  SECTION("scaling down leaves one worker") {
    REQUIRE(pool->scale(1));
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (pool->workers().size() != 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    CHECK(pool->workers().size() == 1);
    CHECK(pool->stats().restarts == 0);
  }
  SECTION("close returns") {
    CHECK(finishes([&] { pool->close(); }));
  }
  SECTION("shutdown returns") {
    CHECK(finishes([&] { pool->shutdown(100ms); }));
  }
}

TEST_CASE("a pool that fails while other threads submit ends every task it accepted") {
  char marker[] = "/tmp/sp-fail-init-XXXXXX";
  const int fd = ::mkstemp(marker);
  REQUIRE(fd >= 0);
  ::close(fd);
  ::unlink(marker);  // absent: the first workers start
  PoolOptions o = configurable_options(std::string(R"({"fail_init_if": ")") + marker + "\"}", 1);
  o.max_init_failures = 2;
  auto pool = make_pool(o);
  std::FILE* f = std::fopen(marker, "w");  // from now on no worker can start
  REQUIRE(f != nullptr);
  std::fclose(f);
  std::atomic<bool> go{true};
  std::vector<Ticket> accepted;
  std::thread submitter([&] {
    while (go.load()) {
      auto t = pool->submit("configurable", "x");
      if (!t) continue;  // closed (failed): the message reads failure_ while it is set
      accepted.push_back(std::move(t).value());
      std::this_thread::sleep_for(100us);
    }
  });
  const std::int32_t pid = pool->workers().at(0).pid;
  REQUIRE(pool->kill_worker(pid, SIGKILL));
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (pool->stats().state != "failed" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  go.store(false);
  submitter.join();
  ::unlink(marker);
  REQUIRE(pool->stats().state == "failed");
  for (const Ticket& t : accepted) CHECK(t.wait_for(kPatience));
  CHECK(finishes([&] { pool->close(); }));
}
