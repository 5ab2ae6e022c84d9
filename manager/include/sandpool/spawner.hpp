// The OS seam for worker processes: a Spawner starts a program with chosen fds, and a
// ChildProcess owns the result through a pidfd (no SIGCHLD handler, no waitpid(-1): the
// library can live in programs that have children of their own).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/status.hpp>
#include <sandpool/unique_fd.hpp>

namespace sandpool {

struct ExitStatus {
  bool exited = false;  // true: exit code in `code`; false: killed by `signal`
  int code = 0;
  int signal = 0;
};
std::string describe(const ExitStatus& s);  // "exited with code 3", "killed by SIGSEGV"

// Owns a child process: its pid and pidfd. Move-only. The destructor SIGKILLs a child that
// is still running and reaps it, so no child outlives its owner unreaped.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Becomes readable when the child exits (poll/epoll it).
  int pidfd() const { return pidfd_.get(); }
  // Sends a signal through the pidfd (no pid-reuse race). Returns false iff it is gone.
  bool signal(int sig) const;
  // Reaps without blocking. Returns the status once the child has exited, else nullopt.
  std::optional<ExitStatus> try_reap();
  // Blocks until exit and reaps.
  ExitStatus wait();
  bool reaped() const { return status_.has_value(); }

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<ExitStatus> status_;
};

struct SpawnRequest {
  std::string executable;
  std::vector<std::string> args;  // argv[1..]
  // (child fd, parent fd): the parent fd appears as the child fd; every other fd is
  // close-on-exec. stdin is /dev/null unless mapped.
  std::vector<std::pair<int, int>> fds;
  // A cgroup v2 directory fd: the child starts inside that cgroup (clone3
  // CLONE_INTO_CGROUP). Honoured only by a spawner whose places_into_cgroup() is true.
  int into_cgroup_fd = -1;
};

class Spawner {
 public:
  virtual ~Spawner() = default;
  virtual Result<ChildProcess> spawn(const SpawnRequest& request) = 0;
  // Returns true iff spawn() starts the child inside SpawnRequest::into_cgroup_fd, so no
  // placement gate is needed.
  virtual bool places_into_cgroup() const { return false; }
};

// The plain spawner: Boost.Process with posix::use_vfork (a fork from a large manager costs
// ten times more), then pidfd_open.
std::shared_ptr<Spawner> make_process_spawner();

}  // namespace sandpool
