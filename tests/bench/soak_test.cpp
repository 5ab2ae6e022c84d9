// `sandpool-bench --only soak` (and the cluster, cluster-wait, memory and curves groups) at a small
// size: the real bench binary, its pools and its report, so the groups' wiring is checked on every
// test run (the full-size runs are `make bench`, docs/performance.md).
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>

#include "command_runner.hpp"

namespace {

// The report's `GROUP METRIC VALUE UNIT` lines of one group, by metric.
std::map<std::string, double> figures_of(const std::string& out, const std::string& group) {
  std::map<std::string, double> figures;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string g, metric, unit;
    double value = 0;
    if (words >> g >> metric >> value >> unit && g == group) figures[metric] = value;
  }
  return figures;
}

}  // namespace

TEST_CASE("a 20,000-task soak ends every accepted task exactly once and loses none") {
  const auto r = sandpool::testing::run_command(
      SANDPOOL_BIN_DIR "/sandpool-bench",
      {"--only", "soak", "--soak-tasks", "20000", "--tasks", "20000", "--soak-deadline", "240"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  auto f = figures_of(r.out, "soak");
  CHECK(f["tasks"] == 20000);
  CHECK(f["lost"] == 0);
  CHECK(f["duplicated"] == 0);
  CHECK(f["unexpected"] == 0);
  CHECK(f["completed"] + f["dead_lettered"] + f["cancelled"] == 20000);
  // The chaos happened: workers crashed, tasks were dead-lettered and cancelled.
  CHECK(f["worker_restarts"] > 0);
  CHECK(f["dead_lettered"] > 0);
  CHECK(f["cancelled"] > 0);
  CHECK(f.count("throughput_vs_w1") == 1);
  CHECK(r.out.find("soak lost 0 tasks\n") != std::string::npos);
  CHECK(r.out.find("soak duplicated 0 tasks\n") != std::string::npos);
}

TEST_CASE("the cluster group runs its nodes through a redis-server of its own and loses none") {
  const auto r = sandpool::testing::run_command(SANDPOOL_BIN_DIR "/sandpool-bench",
                                                {"--only", "cluster", "--cluster-tasks", "2000"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  auto f = figures_of(r.out, "cluster");
  CHECK(f["throughput_1"] > 0);
  CHECK(f["throughput_3"] > 0);
  CHECK(f["vs_local"] > 0);
  CHECK(f["kill_tasks"] >= 2000);  // more join while no node is caught holding entries
  CHECK(f["kill_lost"] == 0);
  CHECK(f["kill_held"] > 0);                 // the bench kills the node once it holds entries
  CHECK(f["kill_reran"] >= f["kill_held"]);  // they ran again elsewhere
  CHECK(f["failover_ms"] >= 0);  // from its SIGSTOP; entries idle past the claim time go at once
}

TEST_CASE("the cluster-wait group times waited submits through a poold over redis") {
  const auto r = sandpool::testing::run_command(SANDPOOL_BIN_DIR "/sandpool-bench",
                                                {"--only", "cluster-wait"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  auto f = figures_of(r.out, "cluster-wait");
  CHECK(f["w2_poold_p50_us"] > 0);
  CHECK(f["w2_poold_p99_us"] >= f["w2_poold_p50_us"]);
}

TEST_CASE("the memory group queues its tasks behind a busy worker and weighs them") {
  const auto r = sandpool::testing::run_command(SANDPOOL_BIN_DIR "/sandpool-bench",
                                                {"--only", "memory", "--memory-tasks", "50000"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);  // every task queued (then every one completed) in each run
  auto f = figures_of(r.out, "memory");
  for (const char* run :
       {"queued_task_journal_off", "queued_task_journal_on", "finished_task_journal_off",
        "finished_task_journal_on", "queued_task_type16_journal_off"}) {
    INFO(run);
    CHECK(f.count(std::string("bytes_per_") + run) == 1);
    // The bench links jemalloc: its allocated bytes are exact. A task holds at least its
    // 64-byte payload and its record, and far less than 4 KiB.
    CHECK(f[std::string("heap_bytes_per_") + run] > 64);
    CHECK(f[std::string("heap_bytes_per_") + run] < 4096);
  }
  // A 16-character type costs a queued task no more than "sleep": the record keeps the index
  // of its interned type, not a copy (inline, 11 bytes more took the record to jemalloc's
  // next class: +38 B here, +8 with the type interned). 50,000 tasks: over 5,000 the runs'
  // other allocations move the figures by 20 B.
  CHECK(f["heap_bytes_per_queued_task_type16_journal_off"] <
        f["heap_bytes_per_queued_task_journal_off"] + 16);
  CHECK(f["journal_disk_bytes_per_queued_task"] > 64);  // the payload is in the journal
  CHECK(f["journal_disk_bytes_per_finished_task"] > 64);
}

TEST_CASE("the cluster soak kills nodes, restarts Redis, drains and reloads, and loses none") {
  // Requires redis-server, as the cluster group does (a Debian package the CI image has).
  const auto r = sandpool::testing::run_command(
      SANDPOOL_BIN_DIR "/sandpool-bench",
      {"--only", "cluster-soak", "--cluster-soak-tasks", "6000", "--soak-deadline", "300"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  auto f = figures_of(r.out, "cluster-soak");
  CHECK(f["tasks"] == 6000);
  CHECK(f["lost"] == 0);
  CHECK(f["dup"] == 0);
  CHECK(f["unexpected"] == 0);
  CHECK(f["token_mismatches"] == 0);
  CHECK(f["completed"] + f["dead_lettered"] == 6000);
  CHECK(f["dead_lettered"] > 0);  // the chaos plugin's crashes and timeouts happened
  CHECK(f["kills"] >= 3);         // one before each of the drain, the Redis restart, the reload
  CHECK(r.err.find("cluster-soak: lost 0 dup 0") != std::string::npos);
}

TEST_CASE("the curves group queues 1e3 and 1e4 tasks behind held workers and drains them") {
  const auto r = sandpool::testing::run_command(
      SANDPOOL_BIN_DIR "/sandpool-bench",
      {"--only", "curves", "--curves-max-queued", "10000", "--curves-max-workers", "8",
       "--curves-tasks", "5000", "--rounds", "200"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);  // every queued task completed, after the holders' cancel
  auto f = figures_of(r.out, "curves");
  for (const char* q : {"_q1e3", "_q1e4"}) {
    INFO(q);
    for (const char* m :
         {"submit_cpu", "submit_wall", "drain_wall", "drain_loop_cpu", "batch_submit_cpu"}) {
      INFO(m);
      CHECK(f[std::string(m) + q] > 0);
    }
    CHECK(f.count(std::string("intake_loop_cpu") + q) == 1);
  }
  CHECK(f.count("submit_cpu_q1e5") == 0);  // --curves-max-queued bounds the depths
  for (const char* w : {"_w2", "_w8"}) {
    INFO(w);
    CHECK(f[std::string("w1_throughput") + w] > 0);
    CHECK(f[std::string("w2_p50") + w] > 0);
    CHECK(f[std::string("w2_p99") + w] >= f[std::string("w2_p50") + w]);
  }
  CHECK(f.count("w1_throughput_w32") == 0);  // --curves-max-workers bounds the worker counts
}
