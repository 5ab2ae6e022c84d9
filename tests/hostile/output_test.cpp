// Hostile plugins that flood: a million progress calls in one task, a log flood through
// both host->log and stdout. What reaches the submitter and the manager's log is bounded,
// and the log says how much was dropped.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>

#include "hostile_world.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::hostile::hostile_options;
using sandpool::hostile::HostileWorld;

TEST_CASE("a million progress calls in one task reach the submitter coalesced") {
  HostileWorld world;
  world.start(hostile_options(sandpool::testing::plugin("progress")));
  std::atomic<std::uint64_t> updates{0};
  std::mutex last_mu;
  std::string last;
  SubmitOptions so;
  so.on_progress = [&](std::uint64_t, std::string_view data) {
    updates.fetch_add(1);
    std::lock_guard lock(last_mu);
    last.assign(data);
  };
  const auto start = std::chrono::steady_clock::now();
  const TaskResult r = world.attack("progress", "1000000", so);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  CHECK(r.result == "done");
  // The host sends at most 1000 updates a second after a burst of 100 (HostLimits), keeping
  // only the latest of the rest, which goes out before the result.
  INFO(updates.load() << " updates in " << seconds << " s");
  CHECK(updates.load() >= 1);
  CHECK(updates.load() <= 100 + 1000 * (seconds + 1) + 1);
  std::lock_guard lock(last_mu);
  CHECK(last == "1000000/1000000");
  world.close_and_check_clean();
}

TEST_CASE("a log flood reaches the manager's log bounded, with the drops counted") {
  HostileWorld world;
  PoolOptions o = hostile_options();
  world.start(o);
  const auto start = std::chrono::steady_clock::now();
  const TaskResult r = world.attack("log_flood", "100000");  // 100000 log() + 100000 printf
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  world.close_and_check_clean();  // every line read and the last drop report made
  const std::size_t via_log = world.log().count("hostile: flooding the log");
  const std::size_t via_stdout = world.log().count("hostile: flooding stdout");
  INFO(via_log << " log() lines and " << via_stdout << " stdout lines in " << seconds << " s");
  // Both kinds share the worker's output budget in the manager.
  CHECK(via_log + via_stdout <= o.output_burst + o.output_lines_per_second * (seconds + 1));
  CHECK(via_log + via_stdout > 0);
  // What was dropped is said, by the worker host (log() over its own limit) and by the
  // manager (everything over the pool's output limit).
  CHECK(world.log().count("output line(s) dropped over the limit of 200 lines/s") >= 1);
  // Every stdout line was either logged or counted as dropped.
  CHECK(world.final_stats().output_dropped + via_stdout + via_log >= 100000);
}
