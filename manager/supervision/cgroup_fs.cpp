#include "supervision/cgroup_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <ctime>

#include <sandpool/pidfd.hpp>
#include <sandpool/posix_call.hpp>
#include <sandpool/unique_fd.hpp>

namespace sandpool::supervision {

Result<std::string> PosixCgroupFs::read(const std::string& path) const {
  auto fd =
      posix_call("open(" + path + ")", [&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (!fd) return fd.status();
  UniqueFd owned(*fd);
  std::string out;
  char buf[4096];
  for (;;) {
    auto n = posix_call("read(" + path + ")", [&] { return ::read(owned.get(), buf, sizeof buf); });
    if (!n) return n.status();
    if (*n == 0) break;
    out.append(buf, static_cast<std::size_t>(*n));
  }
  return out;
}

Status PosixCgroupFs::write(const std::string& path, std::string_view value) {
  // O_TRUNC: harmless on cgroupfs, and keeps a plain file (a test tree) holding the value.
  auto fd = posix_call("open(" + path + ")",
                       [&] { return ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC); });
  if (!fd) return fd.status();
  UniqueFd owned(*fd);
  // cgroupfs takes a value in one write; a short write is an error like any other.
  const std::string call = "write(" + path + ", \"" + std::string(value) + "\")";
  auto n = posix_call(call, [&] { return ::write(owned.get(), value.data(), value.size()); });
  if (!n) return n.status();
  if (static_cast<std::size_t>(*n) != value.size()) return Status::from_errno(EIO, call);
  return Status::ok();
}

Status PosixCgroupFs::make_dir(const std::string& path) {
  auto r = posix_call("mkdir(" + path + ")", [&] { return ::mkdir(path.c_str(), 0755); });
  return r ? Status::ok() : r.status();
}

Status PosixCgroupFs::remove_dir(const std::string& path) {
  auto r = posix_call("rmdir(" + path + ")", [&] { return ::rmdir(path.c_str()); });
  return r ? Status::ok() : r.status();
}

bool PosixCgroupFs::exists(const std::string& path) const {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool PosixCgroupFs::writable(const std::string& dir) const {
  return ::access(dir.c_str(), W_OK) == 0;
}

std::vector<std::string> PosixCgroupFs::sub_dirs(const std::string& dir) const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (e->d_type == DT_DIR && name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Status PosixCgroupFs::kill_and_wait(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds bound) {
  std::vector<UniqueFd> waiting;
  std::vector<pid_t> waiting_pids;
  for (pid_t pid : pids) {
    if (pid <= 0) return Status::invalid("kill: bad pid " + std::to_string(pid));
    UniqueFd fd(sandpool::pidfd_open(pid));
    if (!fd) {
      if (errno == ESRCH) continue;  // gone, and reaped
      if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
        return Status::from_errno(errno, "kill(" + std::to_string(pid) + ", SIGKILL)");
      }
      continue;
    }
    if (sandpool::pidfd_send_signal(fd.get(), SIGKILL) != 0 && errno != ESRCH) {
      return Status::from_errno(errno, "pidfd_send_signal(" + std::to_string(pid) + ", SIGKILL)");
    }
    waiting.push_back(std::move(fd));
    waiting_pids.push_back(pid);
  }
  // A pidfd polls readable once its process has exited (all its threads).
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!waiting.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::string alive;
      for (pid_t p : waiting_pids) alive += (alive.empty() ? "" : " ") + std::to_string(p);
      return Status::error(Code::kTimeout, "SIGKILLed process(es) " + alive +
                                               " still alive after " +
                                               std::to_string(bound.count()) + " ms");
    }
    std::vector<pollfd> fds;
    for (const UniqueFd& fd : waiting) fds.push_back(pollfd{fd.get(), POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) return Status::from_errno(errno, "poll(pidfds)");
    for (std::size_t i = fds.size(); i-- > 0;) {
      if (fds[i].revents == 0) continue;
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
      waiting_pids.erase(waiting_pids.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return Status::ok();
}

bool PosixCgroupFs::alive(pid_t pid) const {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

void PosixCgroupFs::back_off(int round) {
  // 1, 2, 4 ... 32 ms: what the kernel still holds of exited processes goes within a tick or two.
  const long ms = 1L << std::min(round, 5);
  timespec ts{0, ms * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

std::vector<pid_t> parse_pids(std::string_view text) {
  std::vector<pid_t> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    pid_t pid = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (ec == std::errc() && ptr == line.data() + line.size() && pid > 0) out.push_back(pid);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

long long keyed_value(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      line.remove_prefix(key.size() + 1);
      long long v = 0;
      auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
      if (ec == std::errc()) return v;
      return -1;
    }
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return -1;
}

}  // namespace sandpool::supervision
