// What a Python pool's init reads, declared as its sandbox.init.read_paths as a user's pool
// declares it (docs/plugin-guide.md, "python"): the standard library, Debian's dist-packages
// (imported by `site`) and the directories of plugin_config's "path".
#pragma once

#include <string>
#include <vector>

namespace sandpool::testing {

inline constexpr const char* kPythonStdlib = "/usr/lib/python3.11";
inline constexpr const char* kPythonDistPackages = "/usr/lib/python3/dist-packages";

// Returns the directories above for `plugin_config` (JSON whose "path" is a list of plain
// strings, as the tests write it).
inline std::vector<std::string> python_init_read_paths(const std::string& plugin_config) {
  std::vector<std::string> paths = {kPythonStdlib, kPythonDistPackages};
  const std::string key = "\"path\": [";
  std::size_t at = plugin_config.find(key);
  if (at == std::string::npos) return paths;
  at += key.size();
  const std::size_t end = plugin_config.find(']', at);
  while (at < end) {
    const std::size_t open = plugin_config.find('"', at);
    if (open == std::string::npos || open > end) break;
    const std::size_t close = plugin_config.find('"', open + 1);
    paths.push_back(plugin_config.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return paths;
}

}  // namespace sandpool::testing
