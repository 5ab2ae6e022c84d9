// Per-worker cgroups: a CgroupTree is this process's parent cgroup(s) ("sandpool-<pid>",
// under its own cgroup in each hierarchy it uses); a WorkerCgroup is one worker's cgroup
// below it, with the worker's memory, pids and CPU limits, its OOM-kill counter, and a
// teardown that kills whatever is still inside and removes the directories.
//
//   v2: <own>/sandpool-<pid>/<pool>-<n>       memory.max, memory.swap.max 0, cpu.max,
//                                              pids.max; memory.events; cgroup.kill
//   v1: <hierarchy>/<own>/sandpool-<pid>/<pool>-<n> for memory, pids (and cpu when a quota
//       is set): memory.limit_in_bytes (+ memsw), pids.max, cpu.cfs_quota_us/period_us;
//       memory.oom_control; killing each process of cgroup.procs through a pidfd
//
// Ownership and lifetime: every WorkerCgroup holds its tree; the tree, once the last
// WorkerCgroup and pool let go of it, kills and removes whatever is left under its parents
// (a worker cgroup whose removal failed), then the parents. A tree also removes the parents
// of dead processes (a manager that was SIGKILLed) when it is opened.
//
// Thread-safety: CgroupTree::create may be called from any thread (pools run on their own
// loop threads); a WorkerCgroup is used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

#include "supervision/cgroup_fs.hpp"
#include "supervision/cgroup_layout.hpp"

namespace sandpool::supervision {

struct CgroupLimits {
  std::uint64_t memory_bytes = 0;  // memory.max / memory.limit_in_bytes; 0: none
  std::uint64_t pids = 0;          // pids.max; 0: none
  double cpus = 0;                 // cpu.max / cfs quota, in CPUs (0.5: half a CPU); 0: none
  bool operator==(const CgroupLimits&) const = default;
};

class WorkerCgroup;

class CgroupTree : public std::enable_shared_from_this<CgroupTree> {
 public:
  // Makes the parent `parent_name` in each hierarchy of `layout`. v2: enables the memory and
  // pids controllers (and cpu, when offered) for the sub-tree; when the own cgroup holds
  // processes (the kernel refuses controllers there), this process first moves itself into
  // the leaf "<own>/sandpool-manager". Fails when a directory is not writable (not root, no
  // delegation) or the controllers cannot be enabled, naming the path and the call.
  static Result<std::shared_ptr<CgroupTree>> open(std::shared_ptr<CgroupFs> fs,
                                                  const CgroupLayout& layout,
                                                  const std::string& parent_name);
  // The real system's tree for this process ("sandpool-<pid>"), shared by every pool in it:
  // detected from /proc/self on first use, kept while anybody holds it.
  static Result<std::shared_ptr<CgroupTree>> system();

  CgroupTree(const CgroupTree&) = delete;
  CgroupTree& operator=(const CgroupTree&) = delete;
  ~CgroupTree();

  CgroupVersion version() const { return layout_.version; }
  // The parent directories (one for v2; one per hierarchy used for v1).
  std::vector<std::string> parents() const;
  // Creates "<pool>-<n>" (n unique in this tree) in every hierarchy and writes `limits`. On
  // failure nothing is left behind. A CPU quota without a cpu controller is an error.
  Result<std::unique_ptr<WorkerCgroup>> create(std::string_view pool, const CgroupLimits& limits);

  CgroupFs& fs() { return *fs_; }

 private:
  CgroupTree(std::shared_ptr<CgroupFs> fs, CgroupLayout layout);
  Status make_parents(const std::string& parent_name);

  std::shared_ptr<CgroupFs> fs_;
  CgroupLayout layout_;
  std::string memory_parent_, pids_parent_, cpu_parent_;  // cpu_parent_ empty: no cpu control
  std::atomic<std::uint64_t> next_{1};
  bool from_system_ = false;  // made by system(): its end is serialised with system()
};

class WorkerCgroup {
 public:
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;
  // destroy(); a failure is left to the tree.
  ~WorkerCgroup();

  CgroupVersion version() const { return tree_->version(); }
  // Every directory of this cgroup (one for v2; memory, pids[, cpu] for v1).
  const std::vector<std::string>& dirs() const { return dirs_; }
  // Moves `pid` (the whole process) into this cgroup in every hierarchy.
  Status place(pid_t pid);
  // v2 only: an O_PATH directory fd for clone3's CLONE_INTO_CGROUP (cgroup_fd).
  Result<UniqueFd> open_for_clone() const;
  // Returns true iff the kernel's OOM killer has killed a process in this cgroup (v2
  // memory.events oom_kill; v1 memory.oom_control oom_kill, or memory.failcnt on kernels
  // without that counter, when a memory limit is set).
  bool oom_killed() const;
  // Kills everything inside (v2 cgroup.kill; v1 SIGKILL through a pidfd to each process of
  // cgroup.procs still listed once opened, again until none is left; never a bare pid),
  // waits until each of those processes has exited, and removes the directories. On success nothing
  // of the worker runs any more (what it forked may remain as zombies, for whoever adopted them to
  // reap). Idempotent.
  Status destroy();

 private:
  friend class CgroupTree;
  WorkerCgroup(std::shared_ptr<CgroupTree> tree, std::vector<std::string> dirs,
               std::string memory_dir, bool memory_limited);

  std::shared_ptr<CgroupTree> tree_;
  std::vector<std::string> dirs_;
  std::string memory_dir_;
  bool memory_limited_ = false;
  bool destroyed_ = false;
};

// Kills every process in the cgroup at `dir` and below, waits (bounded) until each has
// exited, and removes the cgroups, again while a fork that raced the kill keeps one populated
// (EBUSY). ENOENT (already gone) is success; a process that outlives the bound is an error
// naming it.
Status remove_cgroup(CgroupFs& fs, const std::string& dir, CgroupVersion version);

}  // namespace sandpool::supervision
