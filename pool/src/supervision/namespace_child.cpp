// The clone3 child (namespace_child.hpp). Raw system calls only, from here to execve.
#include "supervision/namespace_child.hpp"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>

namespace sandpool::supervision {
namespace {

constexpr std::size_t kMaxFds = 16;

[[noreturn]] void fail(int error_fd, ChildStep step, int index, int error) {
  ChildFailure f;
  f.step = step;
  f.index = index;
  f.error = error;
  ssize_t n;
  do {
    n = ::write(error_fd, &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  ::_exit(127);
}

// In a mount namespace owned by a user namespace, the flags of the host's mounts are locked:
// a read-only remount of a bind mount must keep nosuid/nodev/noexec/atime flags that were
// already set, or the kernel refuses it (EPERM). statfs reports them.
unsigned long locked_flags(const char* path) {
  struct statfs st {};
  if (::statfs(path, &st) != 0) return 0;
  unsigned long flags = 0;
  const auto f = static_cast<unsigned long>(st.f_flags);
  if ((f & ST_NOSUID) != 0) flags |= MS_NOSUID;
  if ((f & ST_NODEV) != 0) flags |= MS_NODEV;
  if ((f & ST_NOEXEC) != 0) flags |= MS_NOEXEC;
  if ((f & ST_NOATIME) != 0) flags |= MS_NOATIME;
  if ((f & ST_NODIRATIME) != 0) flags |= MS_NODIRATIME;
  if ((f & ST_RELATIME) != 0) flags |= MS_RELATIME;
  return flags;
}

// Appends the decimal digits of v to the NUL-terminated text in buf (of size cap); returns
// false when it does not fit.
bool append_decimal(char* buf, std::size_t cap, std::uint64_t v) {
  char digits[24];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof digits);
  std::size_t len = std::strlen(buf);
  if (len + n + 1 > cap) return false;
  while (n > 0) buf[len++] = digits[--n];
  buf[len] = '\0';
  return true;
}

// Appends `text` to the NUL-terminated text in buf (of size cap); false when it does not fit.
bool append_text(char* buf, std::size_t cap, const char* text) {
  const std::size_t len = std::strlen(buf);
  const std::size_t add = std::strlen(text);
  if (len + add + 1 > cap) return false;
  std::memcpy(buf + len, text, add + 1);
  return true;
}

// kOwnProc: <target>/<pid> bound from <host proc>/<pid>, and <target>/self -> <pid>. Without
// a pid namespace the worker keeps this process's pid, so the directory is its own.
int own_proc(const char* target, const char* host_proc) {
  char pid[24] = "";
  char from[512] = "";
  char to[512] = "";
  char self[512] = "";
  if (!append_decimal(pid, sizeof pid, static_cast<std::uint64_t>(::getpid())) ||
      !append_text(from, sizeof from, host_proc) || !append_text(from, sizeof from, "/") ||
      !append_text(from, sizeof from, pid) || !append_text(to, sizeof to, target) ||
      !append_text(to, sizeof to, "/") || !append_text(to, sizeof to, pid) ||
      !append_text(self, sizeof self, target) || !append_text(self, sizeof self, "/self")) {
    return ENAMETOOLONG;
  }
  if (::mkdir(to, 0555) != 0) return errno;
  if (::mount(from, to, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
  // Writable, as a fresh procfs is (lock-down step 3 writes oom_score_adj), but no more.
  const unsigned long flags =
      MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC | locked_flags(to);
  if (::mount(nullptr, to, nullptr, flags, nullptr) != 0) return errno;
  return ::symlink(pid, self) == 0 ? 0 : errno;
}

// Returns 0 or the errno of the failing call.
int apply_mount_op(const MountOp& op, const char* bind_source) {
  const char* target = op.target.c_str();
  switch (op.kind) {
    case MountOp::Kind::kMkdir:
      return ::mkdir(target, 0755) == 0 || errno == EEXIST ? 0 : errno;
    case MountOp::Kind::kTouch: {
      const int fd = ::open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    }
    case MountOp::Kind::kBind: {
      if (::mount(bind_source, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
      unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | locked_flags(target);
      if (!op.device) flags |= MS_NODEV;
      return ::mount(nullptr, target, nullptr, flags, nullptr) == 0 ? 0 : errno;
    }
    case MountOp::Kind::kSymlink:
      return ::symlink(op.source.c_str(), target) == 0 ? 0 : errno;
    case MountOp::Kind::kTmpfs: {
      // "mode=1777,size=" + decimal, built on the stack.
      char data[64] = "mode=1777,size=";
      if (!append_decimal(data, sizeof data, op.size)) return EINVAL;
      return ::mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data) == 0 ? 0 : errno;
    }
    case MountOp::Kind::kProc:
      return ::mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0
                 ? 0
                 : errno;
    case MountOp::Kind::kOwnProc:
      return own_proc(target, bind_source);
  }
  return EINVAL;
}

// Step 5. The host's root moves to kOldRoot under a fresh tmpfs root; the view is built from it,
// then it is detached and the new root made read-only. The staging mount point is /tmp: the
// tmpfs over it moves away with pivot_root, so the host's /tmp stays reachable through the
// old root (bubblewrap does the same).
void build_view(const ChildSetup& s, int error_fd) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fail(error_fd, ChildStep::kMountPrivate, -1, errno);
  }
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    fail(error_fd, ChildStep::kMountRoot, -1, errno);
  }
  if (::chdir("/tmp") != 0 || ::mkdir(kOldRoot + 1, 0755) != 0 ||
      ::syscall(SYS_pivot_root, ".", kOldRoot + 1) != 0 || ::chdir("/") != 0) {
    fail(error_fd, ChildStep::kPivotRoot, -1, errno);
  }
  for (std::size_t i = 0; i < s.mount_count; ++i) {
    if (int err = apply_mount_op(s.mounts[i], s.bind_sources[i].c_str()); err != 0) {
      fail(error_fd, ChildStep::kMountOp, static_cast<int>(i), err);
    }
  }
  if (::umount2(kOldRoot, MNT_DETACH) != 0 || ::rmdir(kOldRoot) != 0) {
    fail(error_fd, ChildStep::kDetachOldRoot, -1, errno);
  }
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0 ||
      ::chdir("/") != 0) {
    fail(error_fd, ChildStep::kRootReadOnly, -1, errno);
  }
}

void loopback_up(int error_fd) {
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) fail(error_fd, ChildStep::kLoopback, -1, errno);
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) fail(error_fd, ChildStep::kLoopback, -1, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) fail(error_fd, ChildStep::kLoopback, -1, errno);
  ::close(sock);
}

// Step 1. The program's fd kept above the fds being mapped (it is executed after the
// mapping, and exec closes it); -1 when the program is run by path.
int keep_exec_fd(const ChildSetup& s, int error_fd) {
  const int exec_fd = s.exec_fd >= 0 ? ::fcntl(s.exec_fd, F_DUPFD_CLOEXEC, 64) : -1;
  if (s.exec_fd >= 0 && exec_fd < 0) fail(error_fd, ChildStep::kMapFds, -1, errno);
  return exec_fd;
}

// Step 2, before waiting for the parent: if it dies from here on, so do we; if it died
// before, its end of the sync pipe is closed and the read below sees EOF.
void die_with_parent(const ChildSetup& s, int error_fd) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    fail(error_fd, ChildStep::kDeathSignal, -1, errno);
  }
  if (!s.wait_for_parent) return;
  // The child has its own copy of the parent's fds (no CLONE_FILES): drop the write end,
  // so that the parent's death is end of file here.
  if (s.sync_write_fd >= 0) ::close(s.sync_write_fd);
  char go = 0;
  ssize_t n;
  do {
    n = ::read(s.sync_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) fail(error_fd, ChildStep::kWaitParent, -1, n == 0 ? EPIPE : errno);
}

// Step 3. The ids first: files can only be created in the new tmpfs by ids mapped in the
// user namespace (EOVERFLOW otherwise), so the view is built as the namespace's root (or the
// worker's user), and bind sources are looked up with its permissions.
// Raw system calls: glibc's setresuid & co. signal every thread it knows of, and the
// threads it knows of are the parent's.
void become_ids(const ChildSetup& s, int error_fd) {
  if (s.drop_groups && ::syscall(SYS_setgroups, 0, nullptr) != 0) {
    fail(error_fd, ChildStep::kSetGroups, -1, errno);
  }
  if (s.become_gid >= 0 &&
      ::syscall(SYS_setresgid, s.become_gid, s.become_gid, s.become_gid) != 0) {
    fail(error_fd, ChildStep::kSetGid, -1, errno);
  }
  if (s.become_uid >= 0 &&
      ::syscall(SYS_setresuid, s.become_uid, s.become_uid, s.become_uid) != 0) {
    fail(error_fd, ChildStep::kSetUid, -1, errno);
  }
}

// Step 4: the uts namespace's hostname and the net namespace's loopback.
void set_up_host(const ChildSetup& s, int error_fd) {
  if (s.hostname != nullptr && ::sethostname(s.hostname, std::strlen(s.hostname)) != 0) {
    fail(error_fd, ChildStep::kHostname, -1, errno);
  }
  if (s.loopback_up) loopback_up(error_fd);
}

// Step 6. The same fd mapping as the plain spawner: every source moves above the target
// range first, so that binding fd 3 cannot clobber a source that happens to be fd 3 or 4.
// stdin is /dev/null unless mapped, as with the plain spawner.
void map_fds(const ChildSetup& s, int error_fd) {
  int moved[kMaxFds];
  const std::size_t n = s.fd_count < kMaxFds ? s.fd_count : kMaxFds;
  for (std::size_t i = 0; i < n; ++i) {
    moved[i] = ::fcntl(s.fds[i].second, F_DUPFD_CLOEXEC, 64);
    if (moved[i] < 0) fail(error_fd, ChildStep::kMapFds, static_cast<int>(i), errno);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (::dup2(moved[i], s.fds[i].first) < 0) {
      fail(error_fd, ChildStep::kMapFds, static_cast<int>(i), errno);
    }
  }
  bool stdin_mapped = false;
  for (std::size_t i = 0; i < n; ++i) stdin_mapped = stdin_mapped || s.fds[i].first == 0;
  if (!stdin_mapped) {
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || (null_fd != 0 && ::dup2(null_fd, 0) < 0)) {
      fail(error_fd, ChildStep::kMapFds, -1, errno);
    }
    if (null_fd != 0) ::close(null_fd);
  }
}

// Step 7. poold blocks SIGTERM/SIGINT/SIGHUP for its signalfd (and the parent blocked
// everything around clone3); the mask survives exec, and a worker must see the defaults.
void unblock_signals() {
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Step 8. From the fd the manager opened: the view need not contain the worker host, and
// the worker's user need not reach its path. Returns only to report the failure.
[[noreturn]] void exec_worker(const ChildSetup& s, int exec_fd, int error_fd) {
  if (exec_fd >= 0) {
    ::syscall(SYS_execveat, exec_fd, "", s.argv, s.envp, AT_EMPTY_PATH);
  } else {
    ::execve(s.path, s.argv, s.envp);
  }
  fail(error_fd, ChildStep::kExec, -1, errno);
}

}  // namespace

void run_namespace_child(const ChildSetup& s) {
  // Above the fds being mapped, so that mapping cannot clobber it.
  const int error_fd = ::fcntl(s.error_fd, F_DUPFD_CLOEXEC, 64);
  if (error_fd < 0) ::_exit(127);
  const int exec_fd = keep_exec_fd(s, error_fd);     // 1
  die_with_parent(s, error_fd);                      // 2
  become_ids(s, error_fd);                           // 3
  set_up_host(s, error_fd);                          // 4
  if (s.mounts != nullptr) build_view(s, error_fd);  // 5
  map_fds(s, error_fd);                              // 6
  unblock_signals();                                 // 7
  exec_worker(s, exec_fd, error_fd);                 // 8
}

std::string describe_child_failure(const ChildFailure& f, const ChildSetup& s) {
  std::string what;
  switch (f.step) {
    case ChildStep::kDeathSignal:
      what = "prctl(PR_SET_PDEATHSIG, SIGKILL)";
      break;
    case ChildStep::kWaitParent:
      what = "waiting for the id maps";
      break;
    case ChildStep::kSetGroups:
      what = "setgroups(0)";
      break;
    case ChildStep::kSetGid:
      what = "setresgid(" + std::to_string(s.become_gid) + ")";
      break;
    case ChildStep::kSetUid:
      what = "setresuid(" + std::to_string(s.become_uid) + ")";
      break;
    case ChildStep::kHostname:
      what = std::string("sethostname(") + (s.hostname ? s.hostname : "") + ")";
      break;
    case ChildStep::kLoopback:
      what = "ioctl(SIOCSIFFLAGS, lo up)";
      break;
    case ChildStep::kMountPrivate:
      what = "mount(/, MS_REC|MS_PRIVATE)";
      break;
    case ChildStep::kMountRoot:
      what = "mount(tmpfs, /tmp) for the new root";
      break;
    case ChildStep::kPivotRoot:
      what = std::string("pivot_root(/tmp, ") + kOldRoot + ")";
      break;
    case ChildStep::kMountOp: {
      if (f.index < 0 || static_cast<std::size_t>(f.index) >= s.mount_count) {
        what = "mount";
        break;
      }
      const MountOp& op = s.mounts[f.index];
      switch (op.kind) {
        case MountOp::Kind::kMkdir:
          what = "mkdir(" + op.target + ")";
          break;
        case MountOp::Kind::kTouch:
          what = "open(" + op.target + ", O_CREAT)";
          break;
        case MountOp::Kind::kBind:
          what = "mount(" + op.target + ", MS_BIND|MS_RDONLY)";
          break;
        case MountOp::Kind::kSymlink:
          what = "symlink(" + op.source + ", " + op.target + ")";
          break;
        case MountOp::Kind::kTmpfs:
          what = "mount(tmpfs, " + op.target + ")";
          break;
        case MountOp::Kind::kProc:
          what = "mount(proc, " + op.target + ")";
          break;
        case MountOp::Kind::kOwnProc:
          what = "mount(" + std::string(kOldRoot) + op.target + "/<pid>, " + op.target +
                 "/<pid>, MS_BIND)";
          break;
      }
      break;
    }
    case ChildStep::kDetachOldRoot:
      what = std::string("umount2(") + kOldRoot + ", MNT_DETACH)";
      break;
    case ChildStep::kRootReadOnly:
      what = "mount(/, MS_REMOUNT|MS_RDONLY)";
      break;
    case ChildStep::kMapFds:
      what = "dup2 (fd mapping)";
      break;
    case ChildStep::kExec:
      what = std::string(s.exec_fd >= 0 ? "execveat(" : "execve(") + (s.path ? s.path : "") + ")";
      break;
  }
  return what + ": " + std::strerror(f.error);
}

}  // namespace sandpool::supervision
