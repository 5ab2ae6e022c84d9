#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench {

std::string plugin_path(const BenchOptions& o, const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 3 && name_or_path.ends_with(".so"))) {
    return name_or_path;
  }
  std::filesystem::path dir = o.plugin_dir;
  if (dir.empty()) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    dir = ec ? std::filesystem::path("plugins") : self.parent_path().parent_path() / "plugins";
  }
  return (dir / ("lib" + name_or_path + ".so")).string();
}

std::shared_ptr<spdlog::logger> bench_logger(const BenchOptions& o) {
  static std::shared_ptr<spdlog::logger> logger = [&] {
    auto l = spdlog::stderr_color_mt("sandpool-bench");
    l->set_level(spdlog::level::from_str(o.log_level));
    return l;
  }();
  return logger;
}

PoolOptions pool_options(const BenchOptions& o, const std::string& plugin, std::uint32_t workers,
                         std::uint32_t concurrency) {
  PoolOptions p;
  p.name = "bench";
  p.plugin_path = plugin_path(o, plugin);
  p.workers = workers;
  p.concurrency = concurrency;
  p.logger = bench_logger(o);
  // The spin experiments of docs/performance.md set it from the environment.
  if (const char* spin = std::getenv("SANDPOOL_SPIN_US")) {
    p.spin_us = static_cast<std::uint32_t>(std::atoi(spin));
  }
  return p;
}

std::unique_ptr<Pool> start_pool(const PoolOptions& opts) {
  auto pool = Pool::create(opts);
  if (!pool) {
    std::cerr << "sandpool-bench: cannot start a pool on " << opts.plugin_path << ": "
              << pool.status().message() << "\n";
    return nullptr;
  }
  // create() returns once the first worker is ready; a benchmark wants all of them.
  const std::int64_t until = ipc::monotonic_ns() + 10'000'000'000;
  for (;;) {
    std::uint32_t ready = 0;
    for (const WorkerInfo& w : (*pool)->workers()) ready += w.state == "idle" || w.state == "busy";
    if (ready >= opts.workers) break;
    if (ipc::monotonic_ns() > until) {
      std::cerr << "sandpool-bench: only " << ready << " of " << opts.workers
                << " workers became ready\n";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::move(pool).value();
}

std::string make_payload(std::uint64_t seq, std::uint32_t size) {
  std::string p(size, '\0');
  for (std::uint32_t i = 0; i < size; ++i) {
    p[i] = static_cast<char>('a' + (seq + i) % 26);
  }
  return p;
}

namespace {
std::int64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

std::int64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
std::int64_t process_cpu_ns() { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

SchedTimes pid_sched(int pid) {
  // schedstat: time on CPU (ns), time waiting on a run queue (ns), timeslices.
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  SchedTimes t;
  in >> t.on_cpu_ns >> t.runqueue_ns;
  return in ? t : SchedTimes{};
}

bool wait_until(const char* what, const std::function<bool()>& pred) {
  const std::int64_t until = ipc::monotonic_ns() + kWaitBoundNs;
  while (!pred()) {
    if (ipc::monotonic_ns() > until) {
      std::cerr << "sandpool-bench: gave up waiting for " << what << "\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

std::uint64_t rss_bytes(const std::string& pid) {
  std::ifstream statm("/proc/" + pid + "/statm");
  std::uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::int64_t machine_busy_ns() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  std::int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
               steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  if (!in || cpu != "cpu") return 0;
  const std::int64_t ticks = user + nice + system + irq + softirq + steal;
  return ticks * (1000000000 / ::sysconf(_SC_CLK_TCK));
}

}  // namespace sandpool::bench
