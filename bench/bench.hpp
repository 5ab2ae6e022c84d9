// What every benchmark group shares: the command-line settings, where the plugins are,
// how a benchmark pool is configured, and the groups' entry points.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <sandpool/pool/pool.hpp>
#include <sandpool/pool/pool_options.hpp>

#include "report.hpp"

namespace spdlog {
class logger;
}

namespace sandpool::bench {

struct BenchOptions {
  std::string plugin = "echo";    // W1/W2 plugin: a name in the plugin dir, or a path
  std::string plugin_dir;         // default: <this executable's dir>/../plugins
  std::uint32_t workers = 2;      // W1, W2, W3
  std::uint64_t tasks = 1000000;  // W1
  // W1's crash run: tasks per run, with and without one worker SIGKILLed per second; 0: skip
  std::uint64_t w1_crash_tasks = 5000000;
  std::uint32_t payload_size = 64;
  std::uint32_t concurrency = 0;  // W1; 0: try kW1Concurrencies and report the best
  std::uint32_t rounds = 20000;   // W2 timed round trips (and the raw futex ping-pong)
  std::uint32_t spawns = 50;      // per sandbox profile
  std::string w1_await =
      "on_done";  // on_done: count in SubmitOptions::on_done; idle, tickets: keep Tickets
  std::string w2_wait = "ticket";         // ticket: Ticket::wait(); poll: spin on Ticket::done()
  std::uint64_t service_tasks = 1000000;  // service: tasks in the poolctl batch
  std::uint32_t status_calls = 2000;      // service: status calls timed while it runs (at most)
  std::uint32_t journal_crash_runs = 1;   // journal: kill -9 runs (each on a fresh state dir)
  std::uint64_t cluster_tasks = 20000;    // cluster: tasks per run
  std::uint64_t cluster_soak_tasks = 1000000;   // cluster-soak: tasks over the 3 poold nodes
  std::uint32_t cluster_soak_kill_every_s = 3;  // cluster-soak: a node SIGKILLed this often
  std::uint64_t soak_tasks = 1000000;           // soak: tasks through the chaos pool
  std::uint32_t soak_deadline_s = 1800;       // soak: the whole soak's bound; past it, open = lost
  std::uint64_t soak_seed = 0;                // soak: the plan's generator; 0: a random seed
  std::uint64_t memory_tasks = 1000000;       // memory: tasks queued, and tasks finished, per run
  std::uint64_t curves_max_queued = 1000000;  // curves: the deepest queue (1e3 .. this, x10)
  std::uint32_t curves_max_workers = 128;     // curves: W1/W2 at 2, 8, 32, 128 up to this
  std::uint64_t curves_tasks = 500000;        // curves: W1 tasks per worker count
  std::string log_level = "error";
  bool json = false;
};

// Concurrency settings W1 tries when --concurrency is not given.
inline constexpr std::uint32_t kW1Concurrencies[] = {8, 64, 256};

// Resolves a plugin name ("echo") to <plugin dir>/lib<name>.so; a value with a '/' or a
// ".so" suffix is taken as a path.
std::string plugin_path(const BenchOptions& o, const std::string& name_or_path);
// The pool every workload uses: strict seccomp (the default), a logger on stderr.
PoolOptions pool_options(const BenchOptions& o, const std::string& plugin, std::uint32_t workers,
                         std::uint32_t concurrency);
std::shared_ptr<spdlog::logger> bench_logger(const BenchOptions& o);
// Pool::create, then waits (up to 10 s) until all its workers are ready; null on failure
// (reported on stderr).
std::unique_ptr<Pool> start_pool(const PoolOptions& opts);
// A payload of `size` bytes that differs per task (the echo is checked).
std::string make_payload(std::uint64_t seq, std::uint32_t size);

// CPU time (ns) of the calling thread and of this whole process.
std::int64_t thread_cpu_ns();
std::int64_t process_cpu_ns();
// Another process's main thread, from /proc/<pid>/schedstat (zeros when unreadable): time
// on a CPU, and time spent runnable but waiting for one.
struct SchedTimes {
  std::int64_t on_cpu_ns = 0;
  std::int64_t runqueue_ns = 0;
};
SchedTimes pid_sched(int pid);
// Polls pred() (every ms) until it holds; false, reported on stderr as not `what`, past
// kWaitBoundNs. Every wait of a group is on a condition; the bound only ends a wedged run.
inline constexpr std::int64_t kWaitBoundNs = 600'000'000'000;  // loaded 2-core host
bool wait_until(const char* what, const std::function<bool()>& pred);

// The resident set of a process, in bytes (/proc/<pid>/statm's second field); 0 when
// unreadable.
std::uint64_t rss_bytes(const std::string& pid = "self");
// CPU time (ns) the whole machine spent busy (all CPUs, /proc/stat: everything but idle and
// iowait; steal included), to tell what other processes took during a run.
std::int64_t machine_busy_ns();

// The groups. Each adds its figures to the report; they return false on a setup failure
// (already reported on stderr).
bool run_raw_pingpong(const BenchOptions& o, Report& r);
bool run_raw_echo(const BenchOptions& o, Report& r);
bool run_w1(const BenchOptions& o, Report& r);
// Tenants sharing a pool: a trickle beside a flood, and two floods (issue 17).
bool run_fairness(const BenchOptions& o, Report& r);
bool run_autoscale(const BenchOptions& o, Report& r);
// W1 under the strict seccomp profile against `off`, alternated: the filter's per-task cost.
bool run_sandbox_cost(const BenchOptions& o, Report& r);
// W1 with the built-in round-robin against a dispatch function, alternated: the function's
// per-task cost on the loop thread.
bool run_dispatch_cost(const BenchOptions& o, Report& r);
bool run_w2(const BenchOptions& o, Report& r);
bool run_w3(const BenchOptions& o, Report& r);
bool run_w4(const BenchOptions& o, Report& r);
bool run_spawn(const BenchOptions& o, Report& r);
// The issue-4 targets: the in-process W1 figure, then a real poold from the build tree
// driven by the real poolctl through its socket (service.cpp).
bool run_service(const BenchOptions& o, Report& r);
// poold's HTTP listener under attack and beside the socket (bench/http.cpp).
bool run_http(const BenchOptions& o, Report& r);
// The issue-14 figures: the journal's cost on a poolctl batch and on a single submit with
// sync: full, and a kill -9 of poold that must lose no acknowledged task (journal.cpp).
bool run_journal(const BenchOptions& o, Report& r);
// journal full_disk_refusal_ms (journal_full_disk.cpp): refused submits on a full state dir.
bool journal_full_disk(const BenchOptions& o, Report& r);
// Redis pools: nodes sharing a stream through a redis-server of the bench's own (issue 15).
bool run_cluster(const BenchOptions& o, Report& r);
// The cluster group's batch-layout figures (cluster_batch.cpp), on the group's redis-server.
class RedisChild;
bool add_cluster_batch(const BenchOptions& o, const RedisChild& redis, Report& r);
// This process's CPU time (user + system), µs: the in-process nodes' pools and feeders (their
// workers are processes of their own, not counted).
double process_cpu_us();
// Just the cluster group's w2_p50_us and w2_p99_us, on a redis-server of its own.
bool run_cluster_w2(const BenchOptions& o, Report& r);
// A waited task's latency through one poold process over Redis (cluster_wait.cpp).
bool run_cluster_wait(const BenchOptions& o, Report& r);
// The cluster soak (issue 36): o.cluster_soak_tasks chaos tasks over 3 poold nodes sharing a
// Redis pool, nodes killed and restarted, Redis restarted, a drain and a reload; every task
// is checked at the end: lost 0 dup 0 (cluster_soak.cpp). Its deadline and seed are the
// soak's (--soak-deadline, --soak-seed).
bool run_cluster_soak(const BenchOptions& o, Report& r);

// The soak (issue 11): o.soak_tasks tasks through a pool of the chaos plugin where 1% crash
// their worker, some time out and some are cancelled; every accepted task must end exactly
// once (soak.cpp). Its throughput is compared with W1's from the same run.
bool run_soak(const BenchOptions& o, Report& r);

// The plugins on real libraries (lua, regex): tasks/s through a one-worker pool against the same
// .so called in this process (library_plugins.cpp).
bool run_library_plugins(const BenchOptions& o, Report& r);

// Memory per queued task and per finished task kept for lookup, journal off and on
// (memory.cpp, issue 37).
bool run_memory(const BenchOptions& o, Report& r);

// The curves group (issue 37): submit and dispatch cost per task with 1e3 .. 1e6 (or
// --curves-max-queued) tasks queued, and W1/W2 with 2 .. 128 workers (curves.cpp).
bool run_curves(const BenchOptions& o, Report& r);

// W2's o.rounds sequential round trips through a pool of `workers` (after 1000 unmeasured).
// `hand_off_share`, when given: the fraction of the timed round trips whose submit the
// submitting thread dispatched itself (Pool::hand_offs()); `direct_end_share`: of those whose
// waiter ended the task itself (Pool::direct_ends()).
bool w2_round_trips(const BenchOptions& o, std::uint32_t workers, Summary* out,
                    double* hand_off_share = nullptr, double* direct_end_share = nullptr);
// One W1 run of o.tasks at `concurrency` (the service group's in-process baseline).
bool w1_throughput(const BenchOptions& o, std::uint32_t concurrency, double* tasks_per_s);

}  // namespace sandpool::bench
