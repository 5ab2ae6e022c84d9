#include "poold_child.hpp"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/io.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

#include <sandpool/ipc/wake.hpp>

namespace sandpool::bench {

namespace bp = boost::process;
using ipc::monotonic_ns;
using nlohmann::json;

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

ScratchDir::ScratchDir(const fs::path& under) {
  std::string tmpl = (under / "sandpool-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::string bench_config(const fs::path& dir, const std::string& service_extra,
                         const std::string& name, const std::string& plugin, std::uint32_t workers,
                         std::uint32_t concurrency, const std::string& pool_extra,
                         const std::string& http) {
  const std::string w = std::to_string(workers);
  return "service:\n"
         "  socket: {path: " +
         (dir / "poold.sock").string() +
         ", mode: \"0600\"}\n"
         "  state_dir: " +
         (dir / "state").string() +
         "\n"
         "  http: " +
         http +
         "\n"
         "  log: {level: warn}\n" +
         service_extra + "pools:\n  - name: " + name + "\n    plugin: " + plugin +
         "\n    workers: {min: " + w + ", max: " + w + ", initial: " + w +
         "}\n    concurrency: " + std::to_string(concurrency) + "\n" + pool_extra;
}

Poold::Poold(const fs::path& dir, const fs::path& config, std::string pool)
    : pool_(std::move(pool)),
      socket_((dir / "poold.sock").string()),
      log_(dir / "poold.log"),
      child_((bin_dir() / "poold").string(), bp::args({"--config", config.string()}),
             bp::std_out > log_.string(), bp::std_err > log_.string()) {}

Poold::~Poold() {
  if (client_) (void)client_->shutdown(std::chrono::milliseconds(5000));
  client_.reset();
  std::error_code ec;
  if (child_.valid() && !child_.wait_for(std::chrono::seconds(10), ec)) child_.terminate(ec);
}

void Poold::kill9() {
  client_.reset();
  ::kill(child_.id(), SIGKILL);
  std::error_code ec;
  child_.wait(ec);
}

bool Poold::ready(std::uint32_t workers) {
  const std::int64_t until = monotonic_ns() + 60'000'000'000;
  while (!client_) {
    if (!child_.running()) return fail("poold exited");
    auto c = Client::connect(socket_);
    if (c) client_.emplace(std::move(c).value());
    if (monotonic_ns() > until) return fail("poold did not answer on " + socket_);
    if (!client_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (;;) {
    auto w = client_->workers(pool_);
    std::uint32_t up = 0;
    if (w) {
      for (const ops::WorkerStatus& x : w->workers) up += x.state == "idle" || x.state == "busy";
    }
    if (up >= workers) return true;
    if (monotonic_ns() > until) return fail("the " + pool_ + " workers did not become ready");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<std::uint64_t> Poold::ended() {
  auto s = client_->stats(pool_);
  if (!s || s->pools.empty()) return std::nullopt;
  return s->pools[0].completed + s->pools[0].dead_lettered;
}

bool Poold::fail(const std::string& why) {
  std::cerr << "sandpool-bench: " << pool_ << ": " << why << "; poold's log:\n" << slurp(log_);
  return false;
}

// Runs `poolctl --json batch echo N` and waits until the pool has ended every accepted task.
BatchRun run_batch(const BenchOptions& o, Poold& poold, std::uint64_t tasks, const fs::path& dir) {
  BatchRun run;
  const auto ended0 = poold.ended();
  if (!ended0) {
    std::cerr << "sandpool-bench: service: stats failed before the batch\n";
    return run;
  }
  const fs::path out = dir / "batch.json", err = dir / "batch.err";
  std::error_code ec;  // boost.process does not truncate: a shorter output would keep a tail
  fs::remove(out, ec);
  fs::remove(err, ec);
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

}  // namespace sandpool::bench
