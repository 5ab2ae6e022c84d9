// The fairness group (issue 17): tenants sharing one priority level of one pool.
//
// b_wait_p99_ratio: tasks of about 1 ms (the sleep plugin, 1 ms each); tenant B submits 500
// at a steady 100/s, once alone and once while tenant A's flood of 20,000 (submitted at once)
// is still waiting; the ratio is B's p99 latency from submit to end beside the flood over
// its p99 alone, same run. Without fair queueing each of B's tasks would wait behind the
// whole flood (seconds); with it, behind about one of A's.
// jain_index: A and B both backlogged (10,000 tasks each, equal weights); the tasks each
// completed in every whole second of the run while both still had tasks waiting give Jain's
// index (x_a + x_b)^2 / (2 (x_a^2 + x_b^2)): 1 is a perfectly even split. The lowest window's
// is reported.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

constexpr std::uint32_t kWorkers = 2;
constexpr std::uint32_t kFlood = 20000;
constexpr std::uint32_t kTrickle = 500;
constexpr double kTrickleRate = 100;  // tasks/s
constexpr std::uint32_t kBacklogged = 10000;

double p99_ms(std::vector<std::int64_t> ns) {
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  return static_cast<double>(ns[(ns.size() * 99) / 100]) / 1e6;
}

// Tenant B's trickle: `n` tasks at kTrickleRate; returns each one's submit-to-end time.
std::vector<std::int64_t> trickle(Pool& pool, const std::string& type, std::uint32_t n) {
  std::vector<std::int64_t> out(n, -1);
  std::atomic<std::uint32_t> done{0};
  const std::int64_t t0 = ipc::monotonic_ns();
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::int64_t due = t0 + static_cast<std::int64_t>(i * 1e9 / kTrickleRate);
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(std::max<std::int64_t>(0, due - ipc::monotonic_ns())));
    SubmitOptions so;
    so.tenant = "b";
    const std::int64_t submitted = ipc::monotonic_ns();
    so.on_done = [&out, &done, i, submitted](const TaskResult&) {
      out[i] = ipc::monotonic_ns() - submitted;
      done.fetch_add(1);
    };
    if (!pool.submit(type, "1", std::move(so))) return {};
  }
  while (done.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return out;
}

// Submits `n` tasks of `tenant` at once (their ends counted per second into `per_second`).
bool flood(Pool& pool, const std::string& type, const std::string& tenant, std::uint32_t n,
           std::int64_t t0, std::mutex* mu, std::map<std::int64_t, std::uint32_t>* per_second) {
  for (std::uint32_t i = 0; i < n; ++i) {
    SubmitOptions so;
    so.tenant = tenant;
    if (per_second != nullptr) {
      so.on_done = [mu, per_second, t0](const TaskResult&) {
        std::lock_guard lock(*mu);
        ++(*per_second)[(ipc::monotonic_ns() - t0) / 1000000000];
      };
    }
    if (auto t = pool.submit(type, "1", std::move(so)); !t) {
      std::cerr << "sandpool-bench: fairness submit: " << t.status().message() << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

bool run_fairness(const BenchOptions& o, Report& r) {
  PoolOptions opts = pool_options(o, "sleep", kWorkers, 1);
  opts.queue_capacity = kFlood + kTrickle + 2 * kBacklogged;
  auto pool = start_pool(opts);
  if (!pool) return false;
  const std::string type = pool->task_types().front();

  // B alone, then B beside A's flood.
  const std::vector<std::int64_t> alone = trickle(*pool, type, kTrickle);
  pool->wait_idle();
  if (!flood(*pool, type, "a", kFlood, 0, nullptr, nullptr)) return false;
  const std::vector<std::int64_t> beside = trickle(*pool, type, kTrickle);
  const std::uint64_t a_left = pool->stats().queued;  // A still waiting when B's last ended
  pool->wait_idle();
  if (alone.size() != kTrickle || beside.size() != kTrickle) return false;
  const double p99_alone = p99_ms(alone), p99_beside = p99_ms(beside);
  r.add("fairness", "b_p99_alone", p99_alone, "ms");
  r.add("fairness", "b_p99_beside_flood", p99_beside, "ms");
  r.add("fairness", "a_waiting_at_b_end", static_cast<double>(a_left), "tasks");
  r.add("fairness", "b_wait_p99_ratio", p99_beside / p99_alone, "ratio");

  // Both backlogged, equal weights.
  std::mutex mu;
  std::map<std::int64_t, std::uint32_t> a_done, b_done;
  const std::int64_t t0 = ipc::monotonic_ns();
  if (!flood(*pool, type, "a", kBacklogged, t0, &mu, &a_done)) return false;
  if (!flood(*pool, type, "b", kBacklogged, t0, &mu, &b_done)) return false;
  pool->wait_idle();
  std::lock_guard lock(mu);
  // Whole seconds in which both still had tasks waiting: neither had finished.
  const std::int64_t a_last = a_done.empty() ? 0 : a_done.rbegin()->first;
  const std::int64_t b_last = b_done.empty() ? 0 : b_done.rbegin()->first;
  const std::int64_t windows = std::min(a_last, b_last);  // the last second of each is partial
  double worst = 1.0;
  for (std::int64_t s = 0; s < windows; ++s) {
    const double xa = a_done[s], xb = b_done[s];
    if (xa + xb == 0) continue;
    worst = std::min(worst, (xa + xb) * (xa + xb) / (2 * (xa * xa + xb * xb)));
  }
  r.add("fairness", "jain_windows", static_cast<double>(windows), "count");
  r.add("fairness", "jain_index", worst, "ratio");
  return true;
}

}  // namespace sandpool::bench
