// The curves group (issue 37): how the pool's cost per task moves with the depth of its queue
// and with the number of its workers, on the same host as the raw baselines.
//   Queue depth: N (1e3, 1e4, ... --curves-max-queued) no-op tasks queued behind two workers
//   held by a long task each; the submit cost is the submitting thread's CPU (and wall) per
//   task while the queue grows from 0 to N, plus the loop's CPU per task taking them in, with
//   Pool::submit one at a time and again with Pool::submit_batch (kCurvesBatch a call). Then
//   the holders are cancelled and the N drain: the loop's CPU per task (dispatch, results,
//   ends) and the wall per task from the first queued task's end to the last one's.
//   Workers: W1 (tasks/s, ring concurrency 64) and W2 (p50, p99) with 2, 8, 32 and 128
//   workers on this host (2 cores: oversubscribed from 8 on).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

constexpr std::uint32_t kHolders = 2;             // workers, one held by each holder
constexpr std::uint32_t kCurvesConcurrency = 64;  // ring slots per worker (W1's middle setting)
constexpr std::uint32_t kCurvesHoldMs = 3600000;  // the holders' sleep; they are cancelled
constexpr std::uint32_t kW1Concurrency = 64;
constexpr std::size_t kCurvesBatch =
    1000;  // tasks per submit_batch (poolctl batch's 2000 / 2)  // W1 at every worker count

// The queued tasks' ends, counted on the loop thread (SubmitOptions::on_done); the first and
// the last end stamp the drain. Only those two read the clock.
struct Ends {
  std::uint64_t expected = 0;
  std::atomic<std::uint64_t> ended{0};
  std::atomic<std::uint64_t> bad{0};
  std::atomic<std::int64_t> first_ns{0};
  std::atomic<std::int64_t> last_ns{0};
  void on_end(const TaskResult& r) {
    if (r.state != TaskState::kCompleted) bad.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t n = ended.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (n == 1) first_ns.store(monotonic_ns(), std::memory_order_relaxed);
    if (n == expected) last_ns.store(monotonic_ns(), std::memory_order_release);
  }
};

struct DepthRun {
  double submit_ns = 0;       // submitting thread's CPU per task
  double submit_wall_ns = 0;  // wall per submit
  double intake_ns = 0;       // the rest of the process (the loop) per task while submitting
  double drain_ns = 0;        // wall per task, first queued end to last
  double drain_loop_ns = 0;   // the process's CPU per task over the drain (the loop)
  double rss_per_task = 0;    // RSS growth per queued task (B)
};

// Submits n no-op tasks whose ends `ends` counts: one submit() each, or submit_batch() calls
// of kCurvesBatch.
bool submit_noops(Pool& pool, std::uint64_t n, bool batched, Ends& ends) {
  const std::string payload = "0us";  // the sleep plugin's no-op
  auto options = [&ends] {
    SubmitOptions so;
    so.on_done = [e = &ends](const TaskResult& r) { e->on_end(r); };
    return so;
  };
  for (std::uint64_t i = 0; i < n;) {
    if (!batched) {
      if (auto t = pool.submit("sleep", payload, options()); !t) {
        std::cerr << "sandpool-bench: curves: submit " << i << ": " << t.status().message() << "\n";
        return false;
      }
      ++i;
      continue;
    }
    std::vector<BatchTask> tasks(std::min<std::uint64_t>(kCurvesBatch, n - i));
    for (BatchTask& t : tasks) {
      t.type = "sleep";
      t.payload = payload;
      t.options = options();
    }
    for (const Result<Ticket>& t : pool.submit_batch(std::move(tasks))) {
      if (!t) {
        std::cerr << "sandpool-bench: curves: submit_batch: " << t.status().message() << "\n";
        return false;
      }
    }
    i += std::min<std::uint64_t>(kCurvesBatch, n - i);
  }
  return true;
}

bool depth_once(const BenchOptions& o, std::uint64_t n, bool batched, DepthRun* out) {
  PoolOptions p = pool_options(o, "sleep", kHolders, kCurvesConcurrency);
  p.queue_capacity = n + 1024;
  p.task_records_max = 1000;  // finished records are not what this weighs
  auto pool = start_pool(p);
  if (!pool) return false;
  SubmitOptions hold;
  hold.timeout = std::chrono::milliseconds(kCurvesHoldMs);
  std::vector<Ticket> holders;
  for (std::uint32_t i = 0; i < kHolders; ++i) {
    auto t = pool->submit("sleep", std::to_string(kCurvesHoldMs), hold);
    if (!t) {
      std::cerr << "sandpool-bench: curves: " << t.status().message() << "\n";
      return false;
    }
    holders.push_back(std::move(t).value());
  }
  if (!wait_until("the holders to run", [&] {
        return std::all_of(holders.begin(), holders.end(),
                           [](const Ticket& t) { return t.state() == TaskState::kRunning; });
      })) {
    return false;
  }
  Ends ends;
  ends.expected = n;
  const std::uint64_t rss0 = rss_bytes();
  const std::int64_t thread0 = thread_cpu_ns(), process0 = process_cpu_ns();
  const std::int64_t t0 = monotonic_ns();
  if (!submit_noops(*pool, n, batched, ends)) return false;
  const std::int64_t t1 = monotonic_ns();
  const std::int64_t thread1 = thread_cpu_ns();
  // Every task taken in by the loop (queued, or in a held worker's ring): the intake is done.
  if (!wait_until("the loop to queue every task",
                  [&] { return pool->stats().submitted >= n + kHolders; })) {
    return false;
  }
  const std::int64_t process1 = process_cpu_ns();
  out->rss_per_task =
      (static_cast<double>(rss_bytes()) - static_cast<double>(rss0)) / static_cast<double>(n);
  for (const Ticket& h : holders) h.cancel();
  if (!wait_until("the queued tasks to end", [&] { return ends.ended.load() == n; })) return false;
  const std::int64_t process2 = process_cpu_ns();
  if (ends.bad.load() != 0) {
    std::cerr << "sandpool-bench: curves: " << ends.bad.load() << " of " << n
              << " queued tasks did not complete\n";
    return false;
  }
  const double dn = static_cast<double>(n);
  out->submit_ns = static_cast<double>(thread1 - thread0) / dn;
  out->submit_wall_ns = static_cast<double>(t1 - t0) / dn;
  out->intake_ns = static_cast<double>((process1 - process0) - (thread1 - thread0)) / dn;
  out->drain_ns =
      static_cast<double>(ends.last_ns.load(std::memory_order_acquire) - ends.first_ns.load()) /
      std::max(1.0, dn - 1);
  out->drain_loop_ns = static_cast<double>(process2 - process1) / dn;
  return true;
}

std::string depth_name(std::uint64_t n) {
  int e = 0;
  while (n >= 10 && n % 10 == 0) {
    n /= 10;
    ++e;
  }
  return n == 1 ? "1e" + std::to_string(e) : std::to_string(n) + "e" + std::to_string(e);
}

}  // namespace

bool run_curves(const BenchOptions& o, Report& r) {
  for (std::uint64_t n = 1000; n <= o.curves_max_queued; n *= 10) {
    DepthRun d, b;
    if (!depth_once(o, n, false, &d) || !depth_once(o, n, true, &b)) return false;
    const std::string q = "_q" + depth_name(n);
    r.add("curves", "submit_cpu" + q, d.submit_ns, "ns/task");
    r.add("curves", "submit_wall" + q, d.submit_wall_ns, "ns/task");
    r.add("curves", "intake_loop_cpu" + q, d.intake_ns, "ns/task");
    r.add("curves", "drain_wall" + q, d.drain_ns, "ns/task");
    r.add("curves", "drain_loop_cpu" + q, d.drain_loop_ns, "ns/task");
    r.add("curves", "rss" + q, d.rss_per_task, "B/task");
    r.add("curves", "batch_submit_cpu" + q, b.submit_ns, "ns/task");
    r.add("curves", "batch_submit_wall" + q, b.submit_wall_ns, "ns/task");
    r.add("curves", "batch_intake_loop_cpu" + q, b.intake_ns, "ns/task");
  }
  BenchOptions w = o;
  w.tasks = o.curves_tasks;
  for (std::uint32_t workers : {2u, 8u, 32u, 128u}) {
    if (workers > o.curves_max_workers) break;
    w.workers = workers;
    double tps = 0;
    if (!w1_throughput(w, kW1Concurrency, &tps)) return false;
    r.add("curves", "w1_throughput_w" + std::to_string(workers), tps, "tasks/s");
    Summary s;
    if (!w2_round_trips(w, workers, &s)) return false;
    r.add("curves", "w2_p50_w" + std::to_string(workers), s.p50, "us");
    r.add("curves", "w2_p99_w" + std::to_string(workers), s.p99, "us");
  }
  return true;
}

}  // namespace sandpool::bench
