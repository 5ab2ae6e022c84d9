// The service group (issue 4's targets): the in-process W1 figure, then a real poold started
// from the build tree on a scratch config, state dir and socket (echo plugin, o.workers
// workers, W1's ring concurrency), driven by the real poolctl binary through the socket:
// `poolctl --json batch` end to end (from starting poolctl until poold counts every task
// completed), and the status round trip while that batch runs.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/io.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/client.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {
namespace {

namespace bp = boost::process;
namespace fs = std::filesystem;
using ipc::monotonic_ns;
using nlohmann::json;

constexpr std::uint32_t kServiceConcurrency = 256;  // W1's best setting (docs/performance.md)
constexpr std::uint32_t kIdleStatusCalls = 100;     // the status baseline, before the batch

fs::path bin_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(".") : self.parent_path();
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A scratch directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/sandpool-bench-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string config_yaml(const BenchOptions& o, const fs::path& dir) {
  const std::string w = std::to_string(o.workers);
  const std::uint32_t concurrency = o.concurrency != 0 ? o.concurrency : kServiceConcurrency;
  return "service:\n"
         "  socket: {path: " +
         (dir / "poold.sock").string() +
         ", mode: \"0600\"}\n"
         "  state_dir: " +
         (dir / "state").string() +
         "\n"
         "  metrics: {listen: 127.0.0.1:0}\n"
         "  log: {level: warn}\n"
         "pools:\n"
         "  - name: echo\n"
         "    plugin: " +
         plugin_path(o, "echo") + "\n    workers: {min: " + w + ", max: " + w + ", initial: " + w +
         "}\n    concurrency: " + std::to_string(concurrency) + "\n";
}

// poold as a child process; its output goes to <dir>/poold.log. The destructor asks it to
// shut down and, if it has not gone within 10 s, kills it.
class Poold {
 public:
  Poold(const fs::path& dir, const fs::path& config)
      : socket_((dir / "poold.sock").string()),
        log_(dir / "poold.log"),
        child_((bin_dir() / "poold").string(), bp::args({"--config", config.string()}),
               bp::std_out > log_.string(), bp::std_err > log_.string()) {}
  ~Poold() {
    if (client_) (void)client_->shutdown(std::chrono::milliseconds(5000));
    client_.reset();
    std::error_code ec;
    if (!child_.wait_for(std::chrono::seconds(10), ec)) child_.terminate(ec);
  }
  Poold(const Poold&) = delete;
  Poold& operator=(const Poold&) = delete;

  // Connects (retrying while poold starts) and waits until the pool has all its workers.
  bool ready(std::uint32_t workers) {
    const std::int64_t until = monotonic_ns() + 30'000'000'000;
    while (!client_) {
      if (!child_.running()) return fail("poold exited");
      auto c = Client::connect(socket_);
      if (c) client_.emplace(std::move(c).value());
      if (monotonic_ns() > until) return fail("poold did not answer on " + socket_);
      if (!client_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (;;) {
      auto w = client_->workers("echo");
      std::uint32_t up = 0;
      if (w) {
        for (const ops::WorkerStatus& x : w->workers) up += x.state == "idle" || x.state == "busy";
      }
      if (up >= workers) return true;
      if (monotonic_ns() > until) return fail("the echo workers did not become ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Tasks of the echo pool that ended (completed or dead-lettered); nullopt on an error.
  std::optional<std::uint64_t> ended() {
    auto s = client_->stats("echo");
    if (!s || s->pools.empty()) return std::nullopt;
    return s->pools[0].completed + s->pools[0].dead_lettered;
  }
  const std::string& socket() const { return socket_; }

 private:
  bool fail(const std::string& why) {
    std::cerr << "sandpool-bench: service: " << why << "; poold's log:\n" << slurp(log_);
    return false;
  }
  std::string socket_;
  fs::path log_;
  bp::child child_;
  std::optional<Client> client_;
};

struct BatchRun {
  bool ok = false;
  double wall_s = 0;  // from starting poolctl until poold counted every task ended
  json summary;       // poolctl's --json output
};

// Runs `poolctl --json batch echo N` and waits until the pool has ended every accepted task.
BatchRun run_batch(const BenchOptions& o, Poold& poold, std::uint64_t tasks, const fs::path& dir) {
  BatchRun run;
  const auto ended0 = poold.ended();
  if (!ended0) {
    std::cerr << "sandpool-bench: service: stats failed before the batch\n";
    return run;
  }
  const fs::path out = dir / "batch.json", err = dir / "batch.err";
  const std::int64_t t0 = monotonic_ns();
  bp::child c((bin_dir() / "poolctl").string(),
              bp::args({"--socket", poold.socket(), "--json", "batch", "echo",
                        std::to_string(tasks), "--payload-size", std::to_string(o.payload_size)}),
              bp::std_out > out.string(), bp::std_err > err.string());
  c.wait();
  if (c.exit_code() != 0) {
    std::cerr << "sandpool-bench: service: poolctl batch exited " << c.exit_code() << ": "
              << slurp(err);
    return run;
  }
  run.summary = json::parse(slurp(out), nullptr, false);
  if (run.summary.is_discarded()) {
    std::cerr << "sandpool-bench: service: poolctl printed no JSON: " << slurp(out) << "\n";
    return run;
  }
  const std::uint64_t accepted = run.summary.value("accepted", std::uint64_t{0});
  const std::int64_t until = monotonic_ns() + 120'000'000'000;
  for (;;) {
    const auto ended = poold.ended();
    if (!ended) {
      std::cerr << "sandpool-bench: service: stats failed during the batch\n";
      return run;
    }
    if (*ended - *ended0 >= accepted) break;
    if (monotonic_ns() > until) {
      std::cerr << "sandpool-bench: service: the batch's tasks did not all end\n";
      return run;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // stats is not free
  }
  run.wall_s = static_cast<double>(monotonic_ns() - t0) / 1e9;
  run.ok = accepted == tasks;
  if (!run.ok)
    std::cerr << "sandpool-bench: service: " << accepted << " of " << tasks << " accepted\n";
  return run;
}

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
  std::ofstream(config) << config_yaml(o, dir.path());
  Poold poold(dir.path(), config);
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
