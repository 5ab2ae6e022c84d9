#include <sandpool/service/host_check.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sandpool/base/unique_fd.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include <sandpool/service/control_options.hpp>
#include <sandpool/service/service.hpp>

namespace sandpool::poold {
namespace {

// Empty when `path` is a regular file this process can open for reading; else why not.
std::string plugin_problem(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::strerror(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  return "";
}

}  // namespace

std::vector<std::string> check_host(Config config) {
  make_paths_absolute(config);
  std::vector<std::string> problems;
  if (auto control = control_options(config.service); !control) {
    problems.push_back(control.status().message());  // names the service key
  }
  const bool root = ::geteuid() == 0;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolConfig& pc = config.pools[i];
    const std::string where = "pools[" + std::to_string(i) + "] (" + pc.name + ")";
    if (std::string why = plugin_problem(pc.plugin_path); !why.empty()) {
      problems.push_back(where + ": plugin " + pc.plugin_path + ": " + why);
    }
    if (root) {
      if (auto user = sandbox::resolve_run_as(pc.user); !user) {
        problems.push_back(where + ": " + user.status().message());  // names sandbox.user
      }
    }
  }
  return problems;
}

}  // namespace sandpool::poold
