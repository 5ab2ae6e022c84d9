// The journal group (issue 14): what the task journal costs and what it keeps.
// - batch_ratio: `poolctl batch` end to end with the journal (sync: normal) over the same
//   batch without it, the median of three alternated runs, two poolds of this process.
// - full_submit_p50/p99: single `submit` round trips with sync: full (an fsync per group
//   commit), one client, one at a time.
// - crash_lost / crash_reran / recovery_ms: 50,000 tasks of about 0.2 ms (the sleep plugin's
//   "200us") submitted in batches while poold is SIGKILLed at a random point; poold is
//   started again on the same state dir; every acknowledged task must reach a terminal
//   state. crash_reran counts those that ran again after the restart (a `lost` attempt
//   "poold restarted"); recovery_ms is from the restart to poold serving, backlog included.
// - crash_points N lost L dup D (issue 34): every SQLite write point of four paths (a
//   finish, a dead-lettering, a stop with `keep`, a dead-letter replay) killed in turn by
//   poold_faults (built with the tests), the plain poold restarted on the state dir, and the
//   tasks found in no place (lost) or in two (dup) counted (crash_points.hpp).
// - full_disk_refusal_ms (issue 34): p99 of submits refused on a full state dir
//   (journal_full_disk.cpp).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include <sandpool/control/client.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "crash_points.hpp"
#include "poold_child.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

constexpr std::uint32_t kEchoConcurrency = 256;  // as the service group
constexpr std::uint64_t kBatchTasks = 100000;    // per batch_ratio run
constexpr int kRatioRuns = 3;                    // of each kind, alternated
constexpr int kFullSubmits = 1000;
constexpr std::uint64_t kCrashTasks = 50000;
constexpr std::uint64_t kCrashChunk = 2000;  // tasks per submit_batch while poold may die

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A poold on a scratch dir of its own: `journal` is the service.journal value.
struct JournalPoold {
  ScratchDir dir;
  fs::path config;
  std::optional<Poold> poold;

  bool start(const std::string& journal, const std::string& pool, const std::string& plugin,
             std::uint32_t workers, std::uint32_t concurrency) {
    if (dir.path().empty()) return false;
    config = dir.path() / "poold.yaml";
    std::ofstream(config) << bench_config(dir.path(), "  journal: " + journal + "\n", pool, plugin,
                                          workers, concurrency);
    return restart(pool, workers);
  }
  bool restart(const std::string& pool, std::uint32_t workers) {
    poold.emplace(dir.path(), config, pool);
    return poold->ready(workers);
  }
};

bool batch_ratio(const BenchOptions& o, Report& r) {
  JournalPoold off, on;
  if (!off.start("off", "echo", plugin_path(o, "echo"), o.workers, kEchoConcurrency) ||
      !on.start("{enabled: true, sync: normal}", "echo", plugin_path(o, "echo"), o.workers,
                kEchoConcurrency)) {
    return false;
  }
  // Warm-up, then alternated runs: a slow moment of the machine hits both kinds alike.
  if (!run_batch(o, *off.poold, 20000, off.dir.path()).ok) return false;
  if (!run_batch(o, *on.poold, 20000, on.dir.path()).ok) return false;
  std::vector<double> without, with;
  for (int i = 0; i < kRatioRuns; ++i) {
    const BatchRun a = run_batch(o, *off.poold, kBatchTasks, off.dir.path());
    const BatchRun b = run_batch(o, *on.poold, kBatchTasks, on.dir.path());
    if (!a.ok || !b.ok) return false;
    without.push_back(static_cast<double>(kBatchTasks) / a.wall_s);
    with.push_back(static_cast<double>(kBatchTasks) / b.wall_s);
  }
  const double w = median(with), wo = median(without);
  r.add("journal", "batch_throughput_off", wo, "tasks/s");
  r.add("journal", "batch_throughput_normal", w, "tasks/s");
  r.add("journal", "batch_ratio", w / wo, "ratio");
  r.add("journal", "batch_tasks", static_cast<double>(kBatchTasks), "tasks");
  return true;
}

bool full_submit(const BenchOptions& o, Report& r) {
  JournalPoold full;
  if (!full.start("{enabled: true, sync: full}", "echo", plugin_path(o, "echo"), o.workers,
                  kEchoConcurrency)) {
    return false;
  }
  Client& c = full.poold->client();
  SubmitRequest t;
  t.type = "echo";
  t.payload = std::string(o.payload_size, 'x');
  std::vector<double> us;
  for (int i = 0; i < kFullSubmits + 50; ++i) {
    const std::int64_t t0 = monotonic_ns();
    auto s = c.submit(t);
    const std::int64_t t1 = monotonic_ns();
    if (!s) return full.poold->fail("submit: " + s.status().to_string());
    if (i >= 50) us.push_back(static_cast<double>(t1 - t0) / 1e3);  // after a warm-up
  }
  const Summary s = summarize(us);
  r.add("journal", "full_submit_p50", s.p50, "us");
  r.add("journal", "full_submit_p99", s.p99, "us");
  r.add("journal", "full_submits", static_cast<double>(s.count), "submits");
  return true;
}

// Submits kCrashTasks in chunks until done or poold is gone; returns the acknowledged ids.
std::vector<std::uint64_t> submit_until_killed(Client& c) {
  std::vector<std::uint64_t> acked;
  SubmitRequest t;
  t.type = "sleep";
  t.payload = "200us";
  const std::vector<SubmitRequest> chunk(kCrashChunk, t);
  while (acked.size() < kCrashTasks) {
    auto ids = c.submit_batch(chunk);
    if (!ids) break;  // poold died: what was not answered is not acknowledged
    for (const Submitted& s : *ids) {
      if (s.status.is_ok()) acked.push_back(s.id);
    }
  }
  return acked;
}

bool crash(const BenchOptions& o, Report& r) {
  JournalPoold p;
  if (!p.start("{enabled: true, sync: normal}", "sleep", plugin_path(o, "sleep"), o.workers, 8)) {
    return false;
  }
  // Killed somewhere in the first ~6 s: while batches arrive, or while the backlog runs
  // (about kCrashTasks * 0.2 ms / workers once all are in).
  std::mt19937_64 rng(std::random_device{}());
  const auto delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 6000)(rng));
  std::vector<std::uint64_t> acked;
  std::thread submitter([&] {
    auto c = Client::connect(p.poold->socket());
    if (c) acked = submit_until_killed(*c);
  });
  std::this_thread::sleep_for(delay);
  p.poold->kill9();
  submitter.join();

  const std::int64_t t0 = monotonic_ns();
  if (!p.restart("sleep", o.workers)) return false;
  const double recovery_ms = static_cast<double>(monotonic_ns() - t0) / 1e6;
  Client& c = p.poold->client();
  std::uint64_t lost = 0, reran = 0;
  for (const std::uint64_t id : acked) {
    auto t = c.wait(id, std::chrono::minutes(5));
    if (!t || (t->state != "completed" && t->state != "dead_lettered" && t->state != "cancelled")) {
      ++lost;
      continue;
    }
    for (const auto& a : t->account.history) {
      if (a.outcome == "lost" && a.error == "poold restarted") {
        ++reran;
        break;
      }
    }
  }
  r.add("journal", "crash_killed_after", static_cast<double>(delay.count()), "ms");
  r.add("journal", "crash_acknowledged", static_cast<double>(acked.size()), "tasks");
  r.add("journal", "crash_lost", static_cast<double>(lost), "tasks");
  r.add("journal", "crash_reran", static_cast<double>(reran), "tasks");
  r.add("journal", "crash_in_flight_bound", static_cast<double>(o.workers) * 8, "tasks");
  r.add("journal", "recovery_ms", recovery_ms, "ms");
  return lost == 0;
}

bool crash_points(const BenchOptions& o, Report& r) {
  namespace cp = crash_points;
  cp::Setup s;
  s.poold = bin_dir() / "poold";
  s.poold_faults = bin_dir() / "poold_faults";
  s.plugin_dir = fs::path(plugin_path(o, "echo")).parent_path();
  if (!fs::exists(s.poold_faults)) {
    std::cerr << "sandpool-bench: journal: " << s.poold_faults.string()
              << " is missing (a test executable: build the tests)\n";
    return false;
  }
  std::uint64_t points = 0, lost = 0, dup = 0;
  for (const cp::Path path :
       {cp::Path::kFinish, cp::Path::kDeadLetter, cp::Path::kStopKeep, cp::Path::kReplay}) {
    ScratchDir dir;
    if (dir.path().empty()) return false;
    s.scratch = dir.path();
    const cp::PathReport p = cp::run_crash_points(path, s);
    points += p.points_run;
    lost += p.lost;
    dup += p.dup;
    r.note(std::string("journal crash_points ") + cp::path_name(path) + ": " +
           std::to_string(p.write_points) + " write points, " + std::to_string(p.crashed) +
           " crashed there, " + std::to_string(p.lost) + " lost, " + std::to_string(p.dup) +
           " dup");
    for (const std::string& problem : p.problems) {
      r.note(std::string("journal crash_points ") + cp::path_name(path) + ": " + problem);
    }
  }
  r.add("journal", "crash_points", static_cast<double>(points),
        "lost " + std::to_string(lost) + " dup " + std::to_string(dup));
  r.add("journal", "crash_points_lost", static_cast<double>(lost), "tasks");
  r.add("journal", "crash_points_dup", static_cast<double>(dup), "tasks");
  return lost == 0 && dup == 0;
}

}  // namespace

bool run_journal(const BenchOptions& o, Report& r) {
  if (!batch_ratio(o, r) || !full_submit(o, r)) return false;
  bool none_lost = true;
  for (std::uint32_t i = 0; i < o.journal_crash_runs; ++i) none_lost = crash(o, r) && none_lost;
  if (!journal_full_disk(o, r)) return false;
  return crash_points(o, r) && none_lost;
}

}  // namespace sandpool::bench
