// The autoscale group (issue 17): one autoscaled pool (workers.min 1, max 8, target queue wait
// 50 ms, a step of 1, cooldown 300 ms, idle_timeout 2 s) of the sleep plugin, tasks of 10 ms
// (they sleep, so more workers help even on 2 cores). A step from idle to 350 tasks/s, which
// needs 4 workers (each serves at most 100/s), held for kLoadSeconds, then nothing.
//
// scale_up_ms: from the first task of the step to the fourth worker ready (tasks are queued,
// so it serves at once). scale_down_s: from the last task's end to the target back at min.
// flaps: a step of the autoscaler reversed within two cooldowns while the load is steady
// (from the fourth worker ready to the end of the load); it must be 0.
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

constexpr double kRate = 350;  // tasks/s: 3.5 workers' worth of 10 ms tasks
constexpr int kLoadSeconds = 6;
constexpr std::uint32_t kMax = 8;
constexpr auto kCooldown = std::chrono::milliseconds(300);
constexpr auto kIdleTimeout = std::chrono::milliseconds(2000);

struct Step {
  std::int64_t at_ns;
  std::uint32_t workers;
  bool up;
};

// Counts the steps reversed within two cooldowns among those in [from, to].
std::uint32_t count_flaps(const std::vector<Step>& steps, std::int64_t from, std::int64_t to) {
  const std::int64_t window = 2 * std::chrono::nanoseconds(kCooldown).count();
  std::uint32_t flaps = 0;
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
    const Step& a = steps[i];
    const Step& b = steps[i + 1];
    if (a.at_ns < from || b.at_ns > to) continue;
    if (a.up != b.up && b.at_ns - a.at_ns < window) ++flaps;
  }
  return flaps;
}

}  // namespace

bool run_autoscale(const BenchOptions& o, Report& r) {
  std::mutex mu;
  std::vector<Step> steps;
  std::vector<std::int64_t> ready_ns;  // kWorkerReady times
  std::uint32_t target = 1;

  PoolOptions opts = pool_options(o, "sleep", 1, 1);
  opts.worker_bounds = {1, kMax};
  opts.autoscale.enabled = true;
  opts.autoscale.target_queue_wait = std::chrono::milliseconds(50);
  opts.autoscale.scale_up_step = 1;
  opts.autoscale.cooldown = kCooldown;
  opts.autoscale.idle_timeout = kIdleTimeout;
  opts.queue_capacity = 100000;
  opts.on_event = [&](const PoolEvent& e) {
    std::lock_guard lock(mu);
    if (e.kind == PoolEvent::Kind::kWorkerReady) ready_ns.push_back(ipc::monotonic_ns());
    if (e.kind == PoolEvent::Kind::kScaled) {
      steps.push_back({ipc::monotonic_ns(), e.workers, e.workers > target});
      target = e.workers;
    }
  };
  auto pool = start_pool(opts);
  if (!pool) return false;
  const std::string type = pool->task_types().front();
  {
    std::lock_guard lock(mu);
    ready_ns.clear();
  }

  // The step: kRate tasks/s for kLoadSeconds, each submitted on time.
  std::atomic<std::uint64_t> done{0};
  const std::uint64_t total = static_cast<std::uint64_t>(kRate * kLoadSeconds);
  const std::int64_t t0 = ipc::monotonic_ns();
  for (std::uint64_t i = 0; i < total; ++i) {
    const std::int64_t due = t0 + static_cast<std::int64_t>(static_cast<double>(i) * 1e9 / kRate);
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(std::max<std::int64_t>(0, due - ipc::monotonic_ns())));
    SubmitOptions so;
    so.on_done = [&done](const TaskResult&) { done.fetch_add(1); };
    if (auto t = pool->submit(type, "10", std::move(so)); !t) {
      std::cerr << "sandpool-bench: autoscale submit: " << t.status().message() << "\n";
      return false;
    }
  }
  const std::int64_t load_end = ipc::monotonic_ns();
  pool->wait_idle();
  const std::int64_t last_end = ipc::monotonic_ns();

  // Back to min: the target, polled (the autoscaler retires idle workers after idle_timeout).
  const std::int64_t give_up = last_end + 10 * std::chrono::nanoseconds(kIdleTimeout).count();
  std::int64_t at_min = -1;
  while (ipc::monotonic_ns() < give_up) {
    if (pool->stats().target_workers == 1) {
      at_min = ipc::monotonic_ns();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::lock_guard lock(mu);
  if (ready_ns.size() < 3 || at_min < 0) {
    std::cerr << "sandpool-bench: autoscale: " << 1 + ready_ns.size()
              << " workers ready at most, or never back at min\n";
    return false;
  }
  const std::int64_t fourth = ready_ns[2];  // the first worker was ready before the step
  std::uint32_t peak = 1;
  for (const Step& s : steps) peak = std::max(peak, s.workers);
  r.add("autoscale", "scale_up_ms", static_cast<double>(fourth - t0) / 1e6, "ms");
  r.add("autoscale", "scale_down_s", static_cast<double>(at_min - last_end) / 1e9, "s");
  r.add("autoscale", "flaps", count_flaps(steps, fourth, load_end), "count");
  r.add("autoscale", "peak_workers", peak, "count");
  r.add("autoscale", "steps", static_cast<double>(steps.size()), "count");
  return true;
}

}  // namespace sandpool::bench
