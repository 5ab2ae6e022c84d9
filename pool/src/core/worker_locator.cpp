#include "core/worker_locator.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace sandpool::core {
namespace {

bool executable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Result<std::string> locate_worker(const std::string& configured) {
  if (!configured.empty()) {
    if (executable(configured)) return configured;
    return Status::error(Code::kNotFound, "worker host not found or not executable: " + configured);
  }
  std::vector<std::string> tried;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back((self.parent_path() / "sandpool-worker").string());
  if (const char* env = std::getenv("SANDPOOL_WORKER")) tried.emplace_back(env);
  // The install tree relative to the program (bin/../libexec/sandpool), so an installed tree
  // moved elsewhere (a package unpacked under another root, `cmake --install --prefix`
  // anywhere) finds its own worker host before the one its configured prefix names.
  if (!ec) {
    tried.push_back((self.parent_path() / SANDPOOL_LIBEXEC_FROM_BIN / "sandpool-worker")
                        .lexically_normal()
                        .string());
  }
  tried.emplace_back(SANDPOOL_LIBEXEC_DIR "/sandpool-worker");
  for (const auto& p : tried) {
    if (executable(p)) return p;
  }
  std::string where;
  for (const auto& p : tried) where += (where.empty() ? "" : ", ") + p;
  return Status::error(Code::kNotFound, "worker host sandpool-worker not found (looked in: " +
                                            where + "; set worker_path or $SANDPOOL_WORKER)");
}

}  // namespace sandpool::core
