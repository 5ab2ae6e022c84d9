// A real poold for the benchmarks that drive the service (service.cpp, journal.cpp): started
// from the build tree on a scratch config, state dir and socket, with the real Client, and
// the real poolctl for batches.
#pragma once

#include <boost/process/child.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <sandpool/control/client.hpp>

#include "bench.hpp"

namespace sandpool::bench {

namespace fs = std::filesystem;

fs::path bin_dir();  // where this executable (and poold, poolctl beside it) is
std::string slurp(const fs::path& p);

// A scratch directory under `under`, removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const fs::path& under = "/tmp");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }  // empty when it could not be made

 private:
  fs::path path_;
};

// poold's config: the service section rooted in `dir` (socket, state dir, the HTTP listener
// `http` (a YAML flow mapping), log level warn) with `service_extra` lines, then one pool
// `name` of `plugin` with `workers` workers (fixed) and `concurrency` tasks per worker ring,
// plus `pool_extra` lines.
std::string bench_config(const fs::path& dir, const std::string& service_extra,
                         const std::string& name, const std::string& plugin, std::uint32_t workers,
                         std::uint32_t concurrency, const std::string& pool_extra = "",
                         const std::string& http = "{listen: 127.0.0.1:0}");

// poold as a child process; its output goes to <dir>/poold.log (appended). The destructor
// asks it to shut down and, if it has not gone within 10 s, kills it.
class Poold {
 public:
  Poold(const fs::path& dir, const fs::path& config, std::string pool);
  ~Poold();
  Poold(const Poold&) = delete;
  Poold& operator=(const Poold&) = delete;

  // Connects (retrying while poold starts) and waits until the pool has `workers` workers.
  bool ready(std::uint32_t workers);
  // Tasks of the pool that ended (completed or dead-lettered); nullopt on an error.
  std::optional<std::uint64_t> ended();
  Client& client() { return *client_; }
  pid_t pid() const { return static_cast<pid_t>(child_.id()); }
  const std::string& socket() const { return socket_; }
  // SIGKILL, then reaps it: the destructor has nothing left to do.
  void kill9();
  bool fail(const std::string& why);  // prints why and poold's log; returns false

 private:
  std::string pool_;
  std::string socket_;
  fs::path log_;
  boost::process::child child_;
  std::optional<Client> client_;
};

struct BatchRun {
  bool ok = false;
  double wall_s = 0;       // from starting poolctl until poold counted every task ended
  nlohmann::json summary;  // poolctl's --json output
};

// Runs `poolctl --json batch echo N` against the pool `echo` and waits until the pool has
// ended every accepted task.
BatchRun run_batch(const BenchOptions& o, Poold& poold, std::uint64_t tasks, const fs::path& dir);

}  // namespace sandpool::bench
