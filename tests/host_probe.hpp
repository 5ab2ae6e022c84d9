// What this machine offers the tests that need a kernel feature (root, namespaces, Landlock,
// per-worker cgroups), probed WITHOUT sandpool's own detection, and how such a test skips.
//
// A test that needs a feature calls require_*() first. When the feature is missing the test
// ends at once as skipped: "SKIPPED: <why>" on stderr and exit code 77, which sp_test registers
// as ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt). ctest runs each case in a process of its
// own, so this ends that case only; running a whole test executable by hand stops at the
// first skip. .ci/run fails on any skip that .ci/expected-skips does not list for the machine.
//
// The probes ask the kernel directly (the effective uid, unshare() in a forked child, the
// landlock_create_ruleset syscall, /proc/self/mountinfo and /proc/self/cgroup, a mkdir in a
// cgroup directory), so a regression that makes sandpool believe a feature is missing fails
// the test instead of silencing it. When a probe and sandpool disagree, the test says so.
//
// Free functions; thread-safe (the namespace probe forks, and the child only calls unshare()
// and _exit(), which a fork of a threaded process may).
#pragma once

#include <linux/landlock.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace sandpool::testing {

// ctest reports a test that exits with this code as skipped (SKIP_RETURN_CODE).
inline constexpr int kSkipExitCode = 77;

// Ends the test as skipped, saying why on stderr.
[[noreturn]] inline void skip_test(const std::string& reason) {
  std::fprintf(stderr, "SKIPPED: %s\n", reason.c_str());
  std::fflush(stderr);
  std::_Exit(kSkipExitCode);
}

// Skips the test unless this process runs as root; `what` says what needs it.
inline void require_root(const std::string& what) {
  if (::geteuid() != 0) skip_test(what + " needs root (euid " + std::to_string(::geteuid()) + ")");
}

// Empty when a child of this process may create a user, pid, net, ipc, uts and mount
// namespace at once (what a namespaced worker gets); otherwise why not.
inline std::string namespaces_refused() {
  constexpr int kAll =
      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS;
  // unshare(CLONE_NEWUSER) refuses a threaded caller (EINVAL): a fresh child is not one.
  const pid_t child = ::fork();
  if (child < 0) return std::string("fork: ") + std::strerror(errno);
  if (child == 0) ::_exit(::unshare(kAll) == 0 ? 0 : errno);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const int err = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return "unshare(CLONE_NEWUSER|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWNS) in a child: " +
         std::string(err != 0 ? std::strerror(err) : "the child died");
}

// Skips the test unless namespaces_refused() is empty.
inline void require_namespaces() {
  if (const std::string why = namespaces_refused(); !why.empty()) skip_test(why);
}

// The kernel's Landlock ABI version (1 and up), or 0 when it has none or it is disabled.
inline int landlock_abi() {
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

// Skips the test unless the kernel has Landlock.
inline void require_landlock() {
  if (landlock_abi() == 0) {
    skip_test(std::string("no Landlock in this kernel: landlock_create_ruleset: ") +
              std::strerror(errno));
  }
}

namespace detail {

// Whether a directory can be made (and is removed again) in cgroup directory `dir`; the
// reason when not.
inline std::string cgroup_dir_refused(const std::string& dir) {
  const std::string probe = dir + "/sp-host-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0755) != 0) return "mkdir(" + probe + "): " + std::strerror(errno);
  ::rmdir(probe.c_str());
  return "";
}

// Each hierarchy of /proc/self/mountinfo: super options ("rw,memory" for v1, "" key for the
// cgroup2 one) -> the directory of this process's cgroup in it.
inline std::map<std::string, std::string> own_cgroup_dirs() {
  std::map<std::string, std::string> own;  // /proc/self/cgroup: controllers -> path
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    own[line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
  }
  std::map<std::string, std::string> dirs;
  std::ifstream mi("/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, super;
    pre >> id >> parent >> dev >> root >> point;
    post >> fstype >> source >> super;
    std::string key;
    if (fstype == "cgroup2") {
      key = "";
    } else if (fstype == "cgroup") {
      // The controllers among the super options, as /proc/self/cgroup names them.
      std::istringstream opts(super);
      for (std::string o; std::getline(opts, o, ',');) {
        if (o == "rw" || o == "ro" || o.find('=') != std::string::npos) continue;
        key += (key.empty() ? "" : ",") + o;
      }
      if (key.empty()) continue;  // a named hierarchy (name=systemd)
    } else {
      continue;
    }
    auto it = own.find(key);
    if (it == own.end()) continue;
    std::string path = it->second;
    if (root != "/" && path.rfind(root, 0) == 0) path = path.substr(root.size());
    dirs[key] = point + (path == "/" ? "" : path);
  }
  return dirs;
}

// The v2 controllers available at `dir` (its cgroup.controllers).
inline std::string v2_controllers(const std::string& dir) {
  std::ifstream in(dir + "/cgroup.controllers");
  std::string all;
  std::getline(in, all);
  return " " + all + " ";
}

}  // namespace detail

// Empty when this process may give a child memory and pids cgroups of its own: as root,
// with both v1 controllers mounted and a directory makeable in this process's cgroup in each,
// or with both in the unified (v2) hierarchy's controllers at this process's cgroup and a
// directory makeable there. Otherwise why not.
inline std::string worker_cgroups_refused() {
  if (::geteuid() != 0) return "per-worker cgroups need root";
  const auto dirs = detail::own_cgroup_dirs();
  std::string why;
  if (dirs.count("memory") != 0 && dirs.count("pids") != 0) {
    why = detail::cgroup_dir_refused(dirs.at("memory"));
    if (why.empty()) why = detail::cgroup_dir_refused(dirs.at("pids"));
    if (why.empty()) return "";
  } else {
    why = "v1: memory and pids are not both mounted";
  }
  if (auto v2 = dirs.find(""); v2 != dirs.end()) {
    const std::string controllers = detail::v2_controllers(v2->second);
    if (controllers.find(" memory ") != std::string::npos &&
        controllers.find(" pids ") != std::string::npos) {
      const std::string v2_why = detail::cgroup_dir_refused(v2->second);
      if (v2_why.empty()) return "";
      return why + "; v2: " + v2_why;
    }
    return why + "; v2: " + v2->second + " offers only [" + controllers + "]";
  }
  return why + "; no cgroup2 hierarchy";
}

// Skips the test unless worker_cgroups_refused() is empty.
inline void require_worker_cgroups() {
  if (const std::string why = worker_cgroups_refused(); !why.empty()) skip_test(why);
}

}  // namespace sandpool::testing
