// The service group (issue 4's targets): the in-process W1 figure, then a real poold started
// from the build tree on a scratch config, state dir and socket (echo plugin, o.workers
// workers, W1's ring concurrency), driven by the real poolctl binary through the socket:
// `poolctl --json batch` end to end (from starting poolctl until poold counts every task
// completed), the status round trip while that batch runs, and what an open dashboard costs
// the batch (its overview page polling once a second plus one events stream, over HTTP).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <sandpool/control/client.hpp>
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

// One open dashboard as a browser holds it (its CPU not counted): the overview page loaded,
// then its script's poll of /api/v1/stats once a second, and one events stream read as the
// events come. Runs until destroyed.
class DashboardLoad {
 public:
  explicit DashboardLoad(const std::string& http)
      : host_(http.substr(0, http.rfind(':'))),
        port_(std::stoi(http.substr(http.rfind(':') + 1))),
        events_client_(host_, port_),
        poller_([this] { poll(); }),
        events_([this] { follow(); }) {}
  ~DashboardLoad() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    events_client_.stop();  // ends the stream's read
    poller_.join();
    events_.join();
  }
  std::uint64_t polls() const { return polls_; }
  std::uint64_t event_bytes() const { return event_bytes_; }
  std::uint64_t failures() const { return failures_; }

 private:
  void poll() {
    httplib::Client c(host_, port_);
    if (!c.Get("/")) ++failures_;
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      auto r = c.Get("/api/v1/stats");
      if (!r || r->status != 200) ++failures_;
      ++polls_;
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
  }
  void follow() {
    (void)events_client_.Get("/api/v1/events", [this](const char*, std::size_t n) {
      event_bytes_ += n;
      std::lock_guard lock(mu_);
      return !stop_;
    });
  }
  const std::string host_;
  const int port_;
  httplib::Client events_client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<std::uint64_t> polls_{0}, event_bytes_{0}, failures_{0};
  std::thread poller_, events_;
};

double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// (d) The dashboard's cost: three pairs of batches, alternated, one without and one with an
// open dashboard (DashboardLoad); the ratio of the medians of their throughputs.
bool measure_dashboard_cost(const BenchOptions& o, Poold& poold, const fs::path& dir, Report& r) {
  auto status = poold.client().status();
  if (!status || status->http.empty()) {
    std::cerr << "sandpool-bench: service: poold reports no HTTP listener\n";
    return false;
  }
  std::vector<double> without, with;
  std::uint64_t polls = 0;
  for (int round = 0; round < 3; ++round) {
    const BatchRun plain = run_batch(o, poold, o.service_tasks, dir);
    if (!plain.ok) return false;
    without.push_back(static_cast<double>(o.service_tasks) / plain.wall_s);
    std::optional<DashboardLoad> load(std::in_place, status->http);
    const BatchRun watched = run_batch(o, poold, o.service_tasks, dir);
    polls += load->polls();
    if (load->failures() != 0) {
      std::cerr << "sandpool-bench: service: the dashboard's requests failed\n";
      return false;
    }
    load.reset();
    if (!watched.ok) return false;
    with.push_back(static_cast<double>(o.service_tasks) / watched.wall_s);
  }
  r.add("service", "dashboard_batch_throughput", median3(with), "tasks/s");
  r.add("service", "dashboard_cost", median3(with) / median3(without), "ratio");
  r.add("service", "dashboard_polls", static_cast<double>(polls), "requests");
  return true;
}

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
  return measure_dashboard_cost(o, poold, dir.path(), r);
}

}  // namespace sandpool::bench
