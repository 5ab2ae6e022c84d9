// The service group (issue 4's targets): the in-process W1 figure, then a real poold started
// from the build tree on a scratch config, state dir and socket (echo plugin, o.workers
// workers, W1's ring concurrency), driven by the real poolctl binary through the socket:
// `poolctl --json batch` end to end (from starting poolctl until poold counts every task
// completed), and the status round trip while that batch runs.
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <sandpool/client.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "poold_child.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

constexpr std::uint32_t kServiceConcurrency = 256;  // W1's best setting (docs/performance.md)
constexpr std::uint32_t kIdleStatusCalls = 100;     // the status baseline, before the batch

// Times `status` round trips on a connection of its own, one every 5 ms, until `stop`.
class StatusProbe {
 public:
  StatusProbe(const std::string& socket, std::uint32_t max_calls)
      : thread_([this, socket, max_calls] { run(socket, max_calls); }) {}
  ~StatusProbe() { finish(); }
  // Stops the probe now (or once its current call returns) and returns its samples.
  std::vector<double> finish() {
    stop_ = true;
    return join();
  }
  // Waits until the probe made its max_calls calls.
  std::vector<double> join() {
    if (thread_.joinable()) thread_.join();
    return samples_ms_;
  }
  std::uint64_t failures() const { return failures_; }

 private:
  void run(const std::string& socket, std::uint32_t max_calls) {
    auto c = Client::connect(socket);
    if (!c) {
      ++failures_;
      return;
    }
    while (!stop_ && samples_ms_.size() < max_calls) {
      const std::int64_t t0 = monotonic_ns();
      auto s = c->status();
      const std::int64_t t1 = monotonic_ns();
      if (!s) ++failures_;
      samples_ms_.push_back(static_cast<double>(t1 - t0) / 1e6);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> failures_{0};
  std::vector<double> samples_ms_;
  std::thread thread_;
};

}  // namespace

bool run_service(const BenchOptions& o, Report& r) {
  const std::uint32_t concurrency = o.concurrency != 0 ? o.concurrency : kServiceConcurrency;
  // (a) The in-process baseline of this run: W1's figure if that group ran, else one W1 run.
  double w1 = 0;
  if (auto found = r.find("W1", "throughput")) {
    w1 = *found;
  } else if (!w1_throughput(o, concurrency, &w1)) {
    return false;
  }
  r.add("service", "w1_throughput", w1, "tasks/s");

  // (b) poold from the build tree, the real poolctl through its socket.
  ScratchDir dir;
  if (dir.path().empty()) {
    std::cerr << "sandpool-bench: service: cannot create a scratch dir\n";
    return false;
  }
  const fs::path config = dir.path() / "poold.yaml";
  // Without the journal: the figures of issue 4, kept comparable (the journal group measures
  // what the journal costs, journal.cpp).
  std::ofstream(config) << bench_config(dir.path(), "  journal: off\n", "echo",
                                        plugin_path(o, "echo"), o.workers, concurrency);
  Poold poold(dir.path(), config, "echo");
  if (!poold.ready(o.workers)) return false;
  if (!run_batch(o, poold, 20000, dir.path()).ok) return false;  // warm-up

  // The baseline: status round trips on an idle poold, same client, same pacing.
  std::vector<double> idle_ms = StatusProbe(poold.socket(), kIdleStatusCalls).join();

  StatusProbe probe(poold.socket(), o.status_calls);
  const BatchRun batch = run_batch(o, poold, o.service_tasks, dir.path());
  std::vector<double> status_ms = probe.finish();
  if (!batch.ok) return false;
  const double throughput = static_cast<double>(o.service_tasks) / batch.wall_s;
  r.add("service", "batch_throughput", throughput, "tasks/s");
  r.add("service", "batch_fraction_of_W1", throughput / w1, "ratio");
  r.add("service", "batch_accept_rate", batch.summary.value("tasks_per_s", 0.0), "tasks/s");
  r.add("service", "batch_resubmitted",
        static_cast<double>(batch.summary.value("resubmitted", std::uint64_t{0})), "tasks");
  r.add("service", "batch_tasks", static_cast<double>(o.service_tasks), "tasks");
  r.add("service", "batch_wall", batch.wall_s, "s");
  r.add("service", "workers", o.workers, "workers");
  r.add("service", "concurrency", concurrency, "tasks/worker");

  // (c) status while the batch ran.
  if (probe.failures() != 0 || status_ms.empty()) {
    std::cerr << "sandpool-bench: service: " << probe.failures() << " status calls failed\n";
    return false;
  }
  const Summary s = summarize(status_ms);
  r.add("service", "status_p50", s.p50, "ms");
  r.add("service", "status_p99", s.p99, "ms");
  r.add("service", "status_max", s.max, "ms");
  r.add("service", "status_calls", static_cast<double>(s.count), "calls");
  const Summary idle = summarize(idle_ms);
  r.add("service", "status_idle_p50", idle.p50, "ms");
  r.add("service", "status_idle_p99", idle.p99, "ms");
  if (idle.p99 > 0) r.add("service", "status_p99_vs_idle", s.p99 / idle.p99, "ratio");
  return true;
}

}  // namespace sandpool::bench
