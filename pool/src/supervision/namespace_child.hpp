// The child's side of a namespaced spawn: what it does between clone and execve.
//
// The child shares the memory of a multi-threaded manager (clone with CLONE_VM, on a stack
// of its own), or is a copy of it (clone3 with CLONE_INTO_CGROUP, a fork), so until exec it
// may only make raw system calls: no allocation, no locks, no stdio, no writes to memory
// but its own stack, and no glibc id setters (setresuid & co. broadcast to the manager's
// threads). Everything it needs is prepared by the parent in a ChildSetup that the child
// only reads, and that outlives it (the parent waits until it execs or fails). One shared
// word remains: with CLONE_VM the child's failed calls set the spawning thread's errno (the
// same TLS); that thread only writes its id maps and blocks on a pipe meanwhile, and what
// the child reports travels through the error pipe, not errno.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "supervision/mount_plan.hpp"

namespace sandpool::supervision {

// Where the host's root is while the view is built (under the new tmpfs root, detached
// before exec).
inline constexpr const char* kOldRoot = "/oldroot";

struct ChildSetup {
  int sync_fd = -1;  // read end: one byte once the parent has written the id maps
  // The write end, which the child closes first: a child holding its own copy of it would
  // never see end of file on sync_fd when the parent dies before writing.
  int sync_write_fd = -1;
  int error_fd = -1;  // write end, close-on-exec: a ChildFailure when a step fails
  bool wait_for_parent = false;
  // Ids to switch to (namespace view) after the maps are written; -1: keep.
  std::int64_t become_uid = -1;
  std::int64_t become_gid = -1;
  bool drop_groups = false;         // setgroups(0, NULL) (only where setgroups is allowed)
  const char* hostname = nullptr;   // uts namespace: sethostname
  bool loopback_up = false;         // net namespace: bring lo up
  const MountOp* mounts = nullptr;  // mount namespace: the view (null: none)
  std::size_t mount_count = 0;
  const std::string* bind_sources = nullptr;  // per mount op: kOldRoot + target
  const std::pair<int, int>* fds = nullptr;   // (child fd, parent fd), as SpawnRequest
  std::size_t fd_count = 0;
  const char* path = nullptr;  // argv[0]; exec'd by path only when exec_fd is -1
  int exec_fd = -1;            // the program's open file: execveat(AT_EMPTY_PATH)
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// The steps, in order; a failure names the step and, for kMountOp, which op.
enum class ChildStep : std::int32_t {
  kDeathSignal,
  kWaitParent,
  kSetGroups,
  kSetGid,
  kSetUid,
  kHostname,
  kLoopback,
  kMountPrivate,
  kMountRoot,
  kPivotRoot,
  kMountOp,
  kDetachOldRoot,
  kRootReadOnly,
  kMapFds,
  kExec,
};

struct ChildFailure {
  ChildStep step = ChildStep::kExec;
  std::int32_t index = -1;  // kMountOp: which op
  std::int32_t error = 0;   // errno
};

// Runs the child's steps and execs; on failure writes a ChildFailure to error_fd and exits
// with 127. Never returns.
[[noreturn]] void run_namespace_child(const ChildSetup& setup);

// "mount(/usr/lib, MS_BIND|MS_RDONLY): Operation not permitted" for a failure reported by
// a child that ran `setup`.
std::string describe_child_failure(const ChildFailure& failure, const ChildSetup& setup);

}  // namespace sandpool::supervision
