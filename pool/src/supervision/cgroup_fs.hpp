// The OS seam of the cgroup component: the few file-system and process calls that creating,
// filling, watching and removing cgroups needs. PosixCgroupFs is the real thing; it works on
// any directory tree, so tests point the cgroup code at a temporary directory laid out like
// /sys/fs/cgroup and override what only the kernel does (populate a new cgroup's files,
// refuse to remove a populated one, kill).
//
// Thread-safety: PosixCgroupFs keeps no state; call it from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::supervision {

// One process opened by its pid (CgroupFs::open_process). Used by one thread at a time.
class OpenedProcess {
 public:
  virtual ~OpenedProcess() = default;
  virtual pid_t pid() const = 0;
  // Sends SIGKILL to this process. A process that has already exited is success.
  virtual Status kill() = 0;
  // Returns true iff the process has exited (a zombie has) by `deadline`; waits until then.
  virtual bool wait_exited(std::chrono::steady_clock::time_point deadline) = 0;
};

class CgroupFs {
 public:
  virtual ~CgroupFs() = default;
  // The whole file (cgroup files are small). kNotFound-like kSystem (ENOENT) when absent.
  virtual Result<std::string> read(const std::string& path) const = 0;
  // One write(2) of `value` to an existing file (never creates it: a cgroup file the
  // kernel did not make is a knob this kernel lacks, and fails with ENOENT).
  virtual Status write(const std::string& path, std::string_view value) = 0;
  virtual Status make_dir(const std::string& path) = 0;
  // rmdir(2): a cgroup goes with its files; EBUSY while it still holds processes.
  virtual Status remove_dir(const std::string& path) = 0;
  virtual bool exists(const std::string& path) const = 0;
  // Returns true iff this process may create entries in `dir`.
  virtual bool writable(const std::string& dir) const = 0;
  // Names of the sub-directories of `dir` (empty when it cannot be read).
  virtual std::vector<std::string> sub_dirs(const std::string& dir) const = 0;
  // Opens the process that has `pid` at this moment: the handle follows that process, never
  // one that takes the pid over after it has gone. Returns nullptr when no process has the
  // pid (ESRCH); an error when the process cannot be opened (EMFILE, ENOSYS), which leaves it
  // unsignalled: a bare pid is never signalled, since it may have been reused.
  virtual Result<std::unique_ptr<OpenedProcess>> open_process(pid_t pid) = 0;
  // Returns true iff a process with this pid exists.
  virtual bool alive(pid_t pid) const = 0;
  // Waits a little before a retry: for a cgroup that lists no process yet refuses to go.
  virtual void back_off(int round) = 0;
};

class PosixCgroupFs : public CgroupFs {
 public:
  Result<std::string> read(const std::string& path) const override;
  Status write(const std::string& path, std::string_view value) override;
  Status make_dir(const std::string& path) override;
  Status remove_dir(const std::string& path) override;
  bool exists(const std::string& path) const override;
  bool writable(const std::string& dir) const override;
  std::vector<std::string> sub_dirs(const std::string& dir) const override;
  // A pidfd (pidfd_open(2)).
  Result<std::unique_ptr<OpenedProcess>> open_process(pid_t pid) override;
  bool alive(pid_t pid) const override;
  void back_off(int round) override;
};

// Parses a cgroup.procs / tasks file: one pid per line; anything else is skipped.
std::vector<pid_t> parse_pids(std::string_view text);
// The number after `key ` in a flat-keyed file (memory.events, memory.oom_control);
// -1 when the key is absent.
long long keyed_value(std::string_view text, std::string_view key);

}  // namespace sandpool::supervision
