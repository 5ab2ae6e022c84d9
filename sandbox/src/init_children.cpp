// Step 5's check on processes (lockdown.hpp): the worker is a child subreaper while the
// plugin's init runs, so afterwards every process init left behind is a child of the worker,
// however it was orphaned; end_init_children() finds them, kills them and says so.
#include <sandpool/sandbox/lockdown.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::sandbox {
namespace {

// A tree that keeps forking while it is killed is given this many rounds (each kills every
// child there is, then reaps them), then reported as it is.
constexpr int kKillRounds = 16;

// Reaps every child that has exited. Returns true iff a child is left (running, stopped or
// traced), false when there is none.
Result<bool> reap_exited_children() {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG) != 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) return false;
      return Status::from_errno(errno, "waitid(P_ALL, WNOHANG)");
    }
    if (info.si_pid == 0) return true;  // children, none of them exited
  }
}

// The parent pid in /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces and
// parentheses, so the fields are read after the last ')'), or -1.
pid_t parent_of(const char* pid) {
  const std::string path = std::string("/proc/") + pid + "/stat";
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return -1;
  char stat[512];
  const std::size_t n = std::fread(stat, 1, sizeof stat - 1, f);
  std::fclose(f);
  stat[n] = '\0';
  const char* close = std::strrchr(stat, ')');
  char state = 0;
  int ppid = -1;
  if (close == nullptr || std::sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// The pids in /proc/self/task/<tid>/children of every thread: whichever thread forked a child
// or adopted it as the subreaper lists it. Only /proc/self is read, which init's Landlock
// view allows (other processes' /proc entries it does not). Returns false when the kernel
// has no such file (CONFIG_PROC_CHILDREN off).
bool list_children_of_tasks(std::vector<pid_t>* children) {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return false;
  bool found = false;
  while (dirent* e = ::readdir(tasks)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/children";
    std::FILE* f = std::fopen(path.c_str(), "re");
    if (f == nullptr) continue;
    found = true;
    int pid = 0;
    while (std::fscanf(f, "%d", &pid) == 1) {
      if (std::find(children->begin(), children->end(), pid) == children->end()) {
        children->push_back(pid);
      }
    }
    std::fclose(f);
  }
  ::closedir(tasks);
  return found;
}

// The pids of this process's children: from its threads' children files, or else from all of
// /proc: whichever of its threads forked them or adopted them as the subreaper, their parent
// is this process. (A pid namespace's /proc shows the namespace's pids, which are the ones
// kill() takes there.)
std::vector<pid_t> list_children() {
  std::vector<pid_t> children;
  if (list_children_of_tasks(&children)) return children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    if (parent_of(e->d_name) == self) children.push_back(std::atoi(e->d_name));
  }
  ::closedir(proc);
  return children;
}

std::string join_pids(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) out += (out.empty() ? "" : ", ") + std::to_string(pid);
  return out;
}

// Kills and reaps every child, round after round: reaping one lets its own children come to
// us (we are their subreaper). Returns the pids killed.
Result<std::vector<pid_t>> kill_children_round_by_round() {
  std::vector<pid_t> seen;
  for (int round = 0; round < kKillRounds; ++round) {
    const std::vector<pid_t> children = list_children();
    if (children.empty()) {
      if (!seen.empty()) break;
      return Status::error(Code::kPlugin,
                           "init left a process running that /proc does not show; it was not "
                           "killed");
    }
    // Our own unreaped children: their pids cannot have been reused, so kill() is safe.
    for (pid_t pid : children) {
      if (std::find(seen.begin(), seen.end(), pid) == seen.end()) seen.push_back(pid);
      ::kill(pid, SIGKILL);
    }
    for (pid_t pid : children) {
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
      }
    }
    Result<bool> left = reap_exited_children();
    if (!left) return left.status();
    if (!*left) break;
  }
  return seen;
}

// As pid 1 of a pid namespace: kill(-1) reaches every other process of the namespace at once
// (a fork cannot slip past it), and each comes to us to be reaped. Returns their pids.
Result<std::vector<pid_t>> kill_the_namespace() {
  auto killed = posix_call("kill(-1, SIGKILL)", [] { return ::kill(-1, SIGKILL); });
  if (!killed && killed.status().sys_errno() != ESRCH) return killed.status();
  std::vector<pid_t> seen;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED) != 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: all reaped
    }
    seen.push_back(info.si_pid);
  }
  return seen;
}

}  // namespace

Status become_child_subreaper() {
  auto r = posix_call("prctl(PR_SET_CHILD_SUBREAPER, 1)",
                      [] { return ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); });
  return r ? Status::ok() : r.status();
}

Status end_init_children() {
  Result<bool> left = reap_exited_children();
  if (!left) return left.status();
  if (!*left) return Status::ok();
  // The init of a pid namespace (the clone3 spawner's workers) has every other process of
  // the namespace below it, and its /proc may be the host's, whose pids are not its own.
  Result<std::vector<pid_t>> killed =
      ::getpid() == 1 ? kill_the_namespace() : kill_children_round_by_round();
  if (!killed) return killed.status();
  Result<bool> still = reap_exited_children();
  const bool gone = still && !*still;
  return Status::error(Code::kPlugin, "init left " + std::to_string(killed->size()) +
                                          " process(es) running (pid " + join_pids(*killed) +
                                          (gone ? "), now killed" : "), not all of them killed"));
}

}  // namespace sandpool::sandbox
