// Runs one of our executables as a user would: argv, text on stdin, and its exit code,
// stdout and stderr back. Files rather than pipes carry the streams, so a chatty child can
// never deadlock the test.
#pragma once

#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/io.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sandpool::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline CommandResult run_command(const std::string& exe, const std::vector<std::string>& args,
                                 const std::string& input = {}) {
  namespace bp = boost::process;
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/sandpool-cmd-XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  const fs::path in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
  std::ofstream(in, std::ios::binary) << input;
  CommandResult r;
  bp::child c(exe, bp::args(args), bp::std_in<in.string(), bp::std_out> out.string(),
              bp::std_err > err.string());
  c.wait();
  r.exit_code = c.exit_code();
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove_all(dir);
  return r;
}

}  // namespace sandpool::testing
