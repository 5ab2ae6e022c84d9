#include <sandpool/pool/proc_stats.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <sandpool/base/unique_fd.hpp>

namespace sandpool::supervision {
namespace {

// Reads a small /proc file into buf (NUL-terminated). Returns false when it cannot.
bool read_small(const std::string& path, char* buf, std::size_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  ssize_t n = ::read(fd.get(), buf, size - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

}  // namespace

std::uint64_t rss_bytes(pid_t pid) {
  char buf[256];
  if (!read_small("/proc/" + std::to_string(pid) + "/statm", buf, sizeof buf)) return 0;
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::int64_t cpu_ns(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  std::int64_t total = 0;
  bool any = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char buf[256];
    if (!read_small(dir + "/" + e->d_name + "/schedstat", buf, sizeof buf)) continue;
    total += std::strtoll(buf, nullptr, 10);
    any = true;
  }
  ::closedir(d);
  return any ? total : -1;
}

std::vector<pid_t> thread_ids(pid_t pid, std::size_t max) {
  std::vector<pid_t> tids;
  if (max == 0) return tids;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return tids;
  bool main_seen = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const auto tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (tid == pid) {
      main_seen = true;
    } else if (tids.size() + 1 < max) {  // one place kept for the main thread
      tids.push_back(tid);
    }
  }
  ::closedir(d);
  if (main_seen) tids.insert(tids.begin(), pid);
  return tids;
}

}  // namespace sandpool::supervision
