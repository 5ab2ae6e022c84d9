// Steps 1, 2, 3 and 6 of the worker's lock-down (lockdown.hpp). Seccomp and its SIGSYS
// reporter live in seccomp_filter.cpp and sigsys_reporter.cpp.
#include <sandpool/sandbox/lockdown.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::sandbox {

Status wait_for_placement(int gate_fd) {
  char byte = 0;
  auto n = posix_call("read(gate)", [&] { return ::read(gate_fd, &byte, 1); });
  ::close(gate_fd);
  if (!n) return n.status();
  if (*n != 1) {
    return Status::error(Code::kClosed,
                         "read(gate): end of file: the manager could not place this worker in "
                         "its cgroups");
  }
  return Status::ok();
}

Status set_parent_death_signal(pid_t expected_parent, int manager_pidfd) {
  auto r = posix_call("prctl(PR_SET_PDEATHSIG, SIGKILL)",
                      [] { return ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); });
  if (!r) return r.status();
  // The request only covers a parent death that happens from now on: if the manager died
  // before it, we have already been re-parented and would outlive it.
  if (manager_pidfd >= 0) {
    // A pidfd polls readable once its process has exited, whatever namespace we are in.
    pollfd p{manager_pidfd, POLLIN, 0};
    auto ready = posix_call("poll(manager pidfd)", [&] { return ::poll(&p, 1, 0); });
    if (!ready) return ready.status();
    if (*ready > 0) {
      return Status::error(Code::kClosed,
                           "the manager's pidfd reports it exited: the manager is gone");
    }
  }
  const pid_t parent = ::getppid();
  // 0: the parent lives in an ancestor pid namespace (a worker that is pid 1 of its own),
  // where its pid means nothing here: only the pidfd above could tell.
  if (parent == 0) return Status::ok();
  if (parent != expected_parent) {
    return Status::error(Code::kClosed,
                         "getppid() is " + std::to_string(parent) + ", not the spawning manager " +
                             std::to_string(expected_parent) + ": the manager is gone");
  }
  return Status::ok();
}

Status close_inherited_fds(std::vector<int> keep) {
  keep.insert(keep.end(), {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO});
  std::erase_if(keep, [](int fd) { return fd < 0; });
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  // Close every gap between the kept fds, then everything above the last one.
  unsigned lo = 0;
  for (int fd : keep) {
    const unsigned k = static_cast<unsigned>(fd);
    if (k > lo) {
      auto r = posix_call("close_range", [&] { return ::close_range(lo, k - 1, 0); });
      if (!r) return r.status();
    }
    lo = k + 1;
  }
  auto r = posix_call("close_range", [&] { return ::close_range(lo, ~0u, 0); });
  return r ? Status::ok() : r.status();
}

namespace {

// Makes `fd` refer to /dev/null opened with `flags`.
Status point_at_dev_null(int fd, int flags) {
  auto opened = posix_call("open(\"/dev/null\")", [&] { return ::open("/dev/null", flags); });
  if (!opened) return opened.status();
  if (*opened == fd) return Status::ok();
  auto dup = posix_call("dup2(/dev/null, " + std::to_string(fd) + ")",
                        [&] { return ::dup2(*opened, fd); });
  ::close(*opened);
  return dup ? Status::ok() : dup.status();
}

bool fd_is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

}  // namespace

Status reset_process_state(const std::vector<std::string>& keep_env) {
  std::vector<std::pair<std::string, std::string>> kept;
  for (const std::string& name : keep_env) {
    if (const char* v = std::getenv(name.c_str())) kept.emplace_back(name, v);
  }
  // clearenv reports failure by its return value alone (errno is unspecified).
  if (::clearenv() != 0) return Status::error(Code::kSystem, "clearenv: failed");
  for (const auto& var : kept) {
    auto r = posix_call("setenv(" + var.first + ")",
                        [&] { return ::setenv(var.first.c_str(), var.second.c_str(), 1); });
    if (!r) return r.status();
  }
  auto cd = posix_call("chdir(\"/\")", [] { return ::chdir("/"); });
  if (!cd) return cd.status();
  ::umask(077);  // cannot fail
  SP_RETURN_IF_ERROR(point_at_dev_null(STDIN_FILENO, O_RDONLY));
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (!fd_is_open(fd)) SP_RETURN_IF_ERROR(point_at_dev_null(fd, O_WRONLY));
  }
  return Status::ok();
}

namespace {

Status set_limit(int resource, const char* name, rlim_t soft, rlim_t hard) {
  struct rlimit current {};
  std::string call = std::string("getrlimit(") + name + ")";
  auto got = posix_call(call, [&] { return ::getrlimit(resource, &current); });
  if (!got) return got.status();
  // Only tighten: without CAP_SYS_RESOURCE raising a hard limit fails, and the inherited
  // limit is already stricter than what was asked.
  struct rlimit want {
    std::min(soft, current.rlim_max), std::min(hard, current.rlim_max)
  };
  call = std::string("setrlimit(") + name + ", " + std::to_string(want.rlim_cur) + ")";
  auto set = posix_call(call, [&] { return ::setrlimit(resource, &want); });
  return set ? Status::ok() : set.status();
}

}  // namespace

Status apply_rlimits(const ResourceLimits& limits) {
  struct Row {
    int resource;
    const char* name;
    std::uint64_t value;
  };
  const Row rows[] = {
      {RLIMIT_AS, "RLIMIT_AS", limits.address_space},
      {RLIMIT_NOFILE, "RLIMIT_NOFILE", limits.open_files},
      {RLIMIT_NPROC, "RLIMIT_NPROC", limits.processes},
      {RLIMIT_FSIZE, "RLIMIT_FSIZE", limits.file_size},
  };
  for (const Row& row : rows) {
    if (row.value == 0) continue;
    SP_RETURN_IF_ERROR(set_limit(row.resource, row.name, row.value, row.value));
  }
  if (limits.cpu_seconds != 0) {
    // SIGXCPU at the soft limit tells the manager why; SIGKILL one second later if the
    // plugin ignores it.
    SP_RETURN_IF_ERROR(
        set_limit(RLIMIT_CPU, "RLIMIT_CPU", limits.cpu_seconds, limits.cpu_seconds + 1));
  }
  return set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0);
}

Status raise_oom_score_adj() {
  auto fd = posix_call("open(\"/proc/self/oom_score_adj\")",
                       [] { return ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); });
  if (!fd) return fd.status();
  static constexpr char kMost[] = "1000";
  auto n = posix_call("write(/proc/self/oom_score_adj, 1000)",
                      [&] { return ::write(*fd, kMost, sizeof kMost - 1); });
  ::close(*fd);
  return n ? Status::ok() : n.status();
}

Status set_no_new_privs() {
  auto r = posix_call("prctl(PR_SET_NO_NEW_PRIVS, 1)",
                      [] { return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); });
  return r ? Status::ok() : r.status();
}

}  // namespace sandpool::sandbox
