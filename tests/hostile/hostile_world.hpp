// The world of one hostile-plugin test: a pool on the hostile plugin, a sibling pool of
// well-behaved echo workers, a captured manager log, and the checks every case ends with.
//
// attack() submits the hostile task together with ordinary "echo" tasks (on the sibling
// pool, and on the hostile pool too when its plugin serves "echo"), waits for all of them,
// requires every ordinary task to complete with its payload, and afterwards requires both
// pools to still serve. close_and_check_clean() closes the pools and requires that nothing
// is left behind: no living process descended from the test (the test is a child
// subreaper, so an orphaned grandchild of a worker comes back to it and is seen; one that is
// dead, killed with its worker's cgroup, is the test's to reap, as init would for poold), no
// worker cgroup in any cgroup hierarchy (host_cgroups.hpp), and no new shared memory object in
// /dev/shm.
//
// Not thread-safe: one test thread drives it. The captured log is written by the pools'
// loop threads under its own lock.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <sandpool/pool/pool.hpp>

#include "test_support.hpp"

namespace sandpool::hostile {

// The hostile plugin (tests/hostile/plugins/hostile.c) and its siblings.
std::string hostile_plugin(const std::string& name = "hostile");
// A plugin built for the integration or worker-host tests, reused here.
std::string integration_plugin(const std::string& name);
std::string worker_host_plugin(const std::string& name);

// ctest reports a test that exits with this code as skipped (SKIP_RETURN_CODE).
inline constexpr int kSkipExitCode = 77;
// Ends the test as skipped, saying why on stderr: for a case this kernel cannot support.
[[noreturn]] void skip_test(const std::string& reason);

// Every line the pools log, kept for the test to search.
class CapturedLog final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines();
  // Lines containing `needle`.
  std::size_t count(std::string_view needle);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  std::mutex lines_mu_;
  std::vector<std::string> lines_;
};

// Options for a hostile pool: 2 workers taking one task at a time each (so ordinary tasks
// run beside the attack, not behind it in its ring), no retries (one attempt to look at),
// and a 512 MiB address-space limit, so no case can take the machine's memory.
PoolOptions hostile_options(const std::string& plugin_path = hostile_plugin());

class HostileWorld {
 public:
  HostileWorld();
  ~HostileWorld();
  HostileWorld(const HostileWorld&) = delete;
  HostileWorld& operator=(const HostileWorld&) = delete;

  // Starts the hostile pool (the test fails if it cannot).
  Pool& start(PoolOptions hostile);
  // Starts it with per-worker cgroups (sandbox.cgroup: required); ends the test as skipped
  // (kSkipExitCode), saying why, when this host cannot give workers cgroups.
  Pool& start_with_cgroups(PoolOptions hostile);
  // Tries to start it: for the cases whose plugin must be refused at start.
  Result<std::unique_ptr<Pool>> try_start(PoolOptions hostile);

  Pool& pool() { return *hostile_; }
  Pool& sibling() { return *sibling_; }
  CapturedLog& log() { return *log_; }

  // Runs the attack beside ordinary tasks (see the top of the file) and returns its account.
  TaskResult attack(const std::string& type, std::string payload, SubmitOptions so = {});
  // Both pools (the hostile one if started) still complete an ordinary task.
  void require_pools_serve();
  // Closes the pools; reaps the test's dead children; requires no descendant process, no
  // worker cgroup and no new shared memory object in /dev/shm.
  void close_and_check_clean();
  // The hostile pool's stats as it closed (close_and_check_clean).
  const PoolStats& final_stats() const { return final_stats_; }

 private:
  Pool& adopt(std::unique_ptr<Pool> hostile);

  std::shared_ptr<CapturedLog> log_;
  std::shared_ptr<spdlog::logger> logger_;
  std::set<std::string> shm_before_;
  std::unique_ptr<Pool> sibling_;
  std::unique_ptr<Pool> hostile_;
  bool serves_echo_ = false;
  PoolStats final_stats_;
};

// The pids of every living process below `root` (zombies included: they are strays too).
std::vector<int> descendants_of(int root);

// What a process has used so far, from /proc/<pid>/stat and status: CPU time of all its
// threads (user + system, in clock ticks of 10 ms) and its peak resident set (VmHWM).
struct ProcessUsage {
  std::chrono::milliseconds cpu{0};
  std::uint64_t peak_rss = 0;  // bytes
};
// The usage of `pid`; the test fails if it cannot be read (the process is gone).
ProcessUsage process_usage(int pid);

}  // namespace sandpool::hostile
