// W4: SIGKILL a busy worker. How long until a replacement serves a task, and whether the
// task that was running on the victim is retried and completes.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/pool.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;
constexpr int kRounds = 5;
constexpr const char* kVictimMs = "200";  // the in-flight task: long enough to be killed mid-run

// Polls until pred() or the deadline (5 s); false on timeout.
template <typename Pred>
bool poll_until(Pred pred) {
  const std::int64_t until = monotonic_ns() + 5'000'000'000;
  while (!pred()) {
    if (monotonic_ns() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace

bool run_w4(const BenchOptions& o, Report& r) {
  // One worker: whatever serves after the kill can only be the replacement. Retries after
  // a short delay, so the figure is about recovery, not the backoff policy.
  PoolOptions opts = pool_options(o, "sleep", 1, 1);
  opts.retry.base = std::chrono::milliseconds(1);
  opts.retry.max = std::chrono::milliseconds(1);
  auto created = Pool::create(opts);
  if (!created) {
    std::cerr << "sandpool-bench: W4: " << created.status().message() << "\n";
    return false;
  }
  Pool& pool = **created;
  const std::string type = pool.task_types().front();
  std::vector<double> served_ms, recovered_ms;
  int retried_and_completed = 0, first_lost = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto victim = pool.submit(type, kVictimMs);
    if (!victim) {
      std::cerr << "sandpool-bench: W4 submit: " << victim.status().message() << "\n";
      return false;
    }
    std::int32_t pid = 0;
    // workers() is a query the pool loop answers, so it also makes the loop look at the
    // worker's started_task word (the ticket turns `running` only when the loop does).
    const bool running = poll_until([&] {
      for (const WorkerInfo& w : pool.workers()) {
        if (w.in_flight > 0) pid = w.pid;
      }
      return pid != 0 && victim->state() == TaskState::kRunning;
    });
    if (!running) {
      std::cerr << "sandpool-bench: W4: the victim task never started running\n";
      return false;
    }
    const std::int64_t t_kill = monotonic_ns();
    ::kill(pid, SIGKILL);
    auto probe = pool.submit(type, "0");
    if (!probe) {
      std::cerr << "sandpool-bench: W4 probe: " << probe.status().message() << "\n";
      return false;
    }
    const TaskResult p = probe->wait();
    const std::int64_t t_served = monotonic_ns();
    const TaskResult v = victim->wait();
    const std::int64_t t_recovered = monotonic_ns();
    if (p.state != TaskState::kCompleted || p.history.empty() ||
        p.history.back().worker_pid == pid) {
      std::cerr << "sandpool-bench: W4: the probe task was not served by a replacement ("
                << to_string(p.state) << ")\n";
      return false;
    }
    served_ms.push_back(static_cast<double>(t_served - t_kill) / 1e6);
    recovered_ms.push_back(static_cast<double>(t_recovered - t_kill) / 1e6);
    const bool lost = !v.history.empty() && v.history.front().outcome == Outcome::kLost;
    first_lost += lost;
    retried_and_completed += lost && v.attempts() >= 2 && v.state == TaskState::kCompleted;
    if (v.state != TaskState::kCompleted) {
      r.note("W4 round " + std::to_string(round) + ": the killed task ended " +
             std::string(to_string(v.state)) + ": " + v.error);
    }
  }
  const Summary served = summarize(served_ms);
  const Summary recovered = summarize(recovered_ms);
  r.add("W4", "kill_to_replacement_served_p50", served.p50, "ms");
  r.add("W4", "kill_to_replacement_served_max", served.max, "ms");
  r.add("W4", "inflight_lost_then_retried_completed",
        static_cast<double>(retried_and_completed) / kRounds, "ratio");
  r.add("W4", "inflight_first_attempt_lost", static_cast<double>(first_lost) / kRounds, "ratio");
  r.add("W4", "kill_to_inflight_completed_p50", recovered.p50, "ms");
  r.add("W4", "inflight_task_duration", std::stod(kVictimMs), "ms");
  r.add("W4", "rounds", kRounds, "kills");
  return true;
}

}  // namespace sandpool::bench
