// Runs the built poolctl as a user would, with a chosen $SANDPOOL_SOCKET (unset unless
// given) and working directory; streams go through files so a chatty child cannot block.
#pragma once

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/io.hpp>
#include <boost/process/start_dir.hpp>
#include <string>
#include <vector>

#include "command_runner.hpp"

namespace sandpool::testing {

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sp-poolctl-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const std::string kPoolctl = std::string(SANDPOOL_BIN_DIR) + "/poolctl";

struct PoolctlEnv {
  std::string socket_env;  // $SANDPOOL_SOCKET; empty: unset
  std::string cwd;         // empty: the test's
};

inline boost::process::environment poolctl_environment(const PoolctlEnv& env) {
  boost::process::environment e = boost::this_process::environment();
  e.erase("SANDPOOL_SOCKET");
  if (!env.socket_env.empty()) e["SANDPOOL_SOCKET"] = env.socket_env;
  return e;
}

inline CommandResult run_poolctl(const std::vector<std::string>& args, const PoolctlEnv& env = {},
                                 const std::string& input = {}) {
  namespace bp = boost::process;
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/sandpool-poolctl-XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  const fs::path in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
  std::ofstream(in, std::ios::binary) << input;
  bp::child c(kPoolctl, bp::args(args), poolctl_environment(env),
              bp::start_dir = env.cwd.empty() ? fs::current_path().string() : env.cwd,
              bp::std_in<in.string(), bp::std_out> out.string(), bp::std_err > err.string());
  c.wait();
  CommandResult r;
  r.exit_code = c.exit_code();
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove_all(dir);
  return r;
}

// poolctl --socket S ARGS...
inline CommandResult poolctl(const std::string& socket, std::vector<std::string> args,
                             const std::string& input = {}) {
  args.insert(args.begin(), {"--socket", socket});
  return run_poolctl(args, {}, input);
}

}  // namespace sandpool::testing
