#include "supervision/cgroup_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <ctime>

#include <sandpool/base/pidfd.hpp>
#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/unique_fd.hpp>

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

namespace {

// A pidfd: signals and polls reach the process that had the pid when it was opened, also
// after that process has been reaped and its pid given to another (they fail with ESRCH).
class PidfdProcess final : public OpenedProcess {
 public:
  PidfdProcess(pid_t pid, UniqueFd fd) : pid_(pid), fd_(std::move(fd)) {}
  pid_t pid() const override { return pid_; }
  Status kill() override {
    if (sandpool::pidfd_send_signal(fd_.get(), SIGKILL) == 0 || errno == ESRCH) {
      return Status::ok();
    }
    return Status::from_errno(errno, "pidfd_send_signal(" + std::to_string(pid_) + ", SIGKILL)");
  }
  bool wait_exited(std::chrono::steady_clock::time_point deadline) override {
    // A pidfd polls readable once its process has exited (all its threads).
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_.get(), POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
      if (n > 0) return true;
      if (n == 0) return false;
      if (errno != EINTR) return false;
    }
  }

 private:
  pid_t pid_;
  UniqueFd fd_;
};

}  // namespace

Result<std::unique_ptr<OpenedProcess>> PosixCgroupFs::open_process(pid_t pid) {
  if (pid <= 0) return Status::invalid("open_process: bad pid " + std::to_string(pid));
  UniqueFd fd(sandpool::pidfd_open(pid));
  if (!fd) {
    if (errno == ESRCH) return std::unique_ptr<OpenedProcess>();  // gone, and reaped
    return Status::from_errno(errno, "pidfd_open(" + std::to_string(pid) + ")");
  }
  return std::unique_ptr<OpenedProcess>(new PidfdProcess(pid, std::move(fd)));
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
