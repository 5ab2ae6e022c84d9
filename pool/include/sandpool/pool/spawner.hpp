// The OS seam for worker processes: a Spawner starts a program with chosen fds, and a
// ChildProcess owns the result through a pidfd (no SIGCHLD handler, no waitpid(-1): the
// library can live in programs that have children of their own).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/sandbox/namespaces.hpp>

namespace spdlog {
class logger;
}

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

// The most fds a SpawnRequest may map into its child (SpawnRequest::fds).
inline constexpr std::size_t kMaxMappedFds = 16;

struct SpawnRequest {
  // The program: its path, which is also argv[0] and its name in messages. When
  // executable_fd is set, that open file is executed instead (execveat(AT_EMPTY_PATH)) and
  // the path is never looked up: the child needs no access to it, and the file executed is
  // the one the caller opened.
  std::string executable;
  int executable_fd = -1;
  std::vector<std::string> args;  // argv[1..]
  // The child's whole environment ("NAME=value" each); nothing of the parent's is passed.
  std::vector<std::string> env;
  // (child fd, parent fd): the parent fd appears as the child fd; every other fd is
  // close-on-exec. stdin is /dev/null unless mapped.
  std::vector<std::pair<int, int>> fds;
  // A cgroup v2 directory fd: the child starts inside that cgroup (clone3's
  // CLONE_INTO_CGROUP), before it runs any code. Honoured only by a spawner whose
  // places_into_cgroup() is true; the plain spawner refuses a request that sets it.
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

struct Clone3SpawnerOptions {
  sandbox::NamespacePolicy namespaces;
  // Shown read-only in the mount namespace's view besides namespaces.readonly_paths (and
  // the program's directory, for a request that names it by path only). The pool passes
  // sandbox.init.read_paths: its workers get the worker host and the plugin as fds.
  std::vector<std::string> view_paths;
  std::shared_ptr<spdlog::logger> logger;  // null: spdlog's default logger
  std::string log_name;                    // "[name]" prefix of its log lines (the pool)
};

// The clone3 spawner (docs/security.md, "Namespaces"): a child with CLONE_PIDFD and
// the CLONE_NEW* flags of the namespaces the kernel allows out of those asked for. It shares
// the manager's memory until it execs (clone with CLONE_VM on its own stack, as posix_spawn
// does), except when a request carries a cgroup fd: then clone3 with CLONE_INTO_CGROUP, a
// fork. The child sets up its namespaces (the parent writes its uid/gid maps meanwhile),
// then execs with the same fd mapping as the plain spawner. docs/security.md ("Namespaces")
// describes each step.
//
// Construction probes which namespaces the kernel lets this process create (a throwaway
// clone3 per namespace). A wanted namespace it refuses is logged once as a warning and left
// out; a required one makes every spawn() fail naming it. Thread-safety: spawn() from one
// thread at a time (the pool's loop thread); in_effect() from any thread.
class Clone3Spawner : public Spawner {
 public:
  // The namespaces each worker gets: those asked for that the kernel allows.
  virtual sandbox::NamespaceSet in_effect() const = 0;
};
std::shared_ptr<Clone3Spawner> make_clone3_spawner(Clone3SpawnerOptions options);

// Returns the namespaces out of `wanted` that this process can create, and in *why (when
// not null) one "net: clone3(CLONE_NEWNET): Operation not permitted" line per refused one.
// Each namespace is tried in a throwaway child, together with a user namespace when `wanted`
// has one and the kernel allows it (an unprivileged process needs it for the others).
sandbox::NamespaceSet probe_namespaces(sandbox::NamespaceSet wanted, std::string* why);

}  // namespace sandpool
