// The worker's view of the file system in its mount namespace, planned in the manager: a
// list of operations the clone3 child replays inside a fresh tmpfs root (namespace_child.hpp).
// Planning is pure over a small file-system seam (ViewFs), so it is unit-tested without
// mounting anything; the child only executes the plan, making system calls and nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::supervision {

// What lstat(2) and readlink(2) say about a path.
struct PathInfo {
  enum class Kind { kMissing, kDirectory, kFile, kCharDevice, kSymlink, kOther };
  Kind kind = Kind::kMissing;
  std::string link_target;  // kSymlink: readlink's text
};

// The file-system seam the planner reads. Thread-safety: const calls only.
class ViewFs {
 public:
  virtual ~ViewFs() = default;
  // Does not follow a final symlink.
  virtual PathInfo inspect(const std::string& path) const = 0;
};
// The real file system.
const ViewFs& posix_view_fs();

// One step of building the view, in the order given. Paths are absolute, in the view (the
// same as in the manager's view: the view only hides, it never moves).
struct MountOp {
  enum class Kind {
    kMkdir,    // mkdir target (0755)
    kTouch,    // create an empty file at target (a bind-mount point for a file)
    kBind,     // bind the manager's `target` here read-only (nosuid; nodev unless `device`)
    kSymlink,  // symlink(source, target)
    kTmpfs,    // a fresh tmpfs of `size` bytes (mode 1777)
    kProc,     // a fresh procfs for the worker's pid namespace
    kOwnProc,  // no pid namespace: a directory holding only the worker's own /proc/<pid>,
               // bound from the manager's /proc (writable, nosuid, nodev, noexec), and the
               // symlink self -> <pid>; the child fills in its pid
  };
  Kind kind = Kind::kMkdir;
  std::string target;
  std::string source;  // kSymlink only: the link's text
  bool device = false;
  std::uint64_t size = 0;
  bool operator==(const MountOp&) const = default;
};

struct MountViewRequest {
  // Must exist (an error names the first missing one): the worker host's directory, the
  // plugin's directory, sandbox.readonly_paths.
  std::vector<std::string> required;
  // Shown when they exist (library directories, /etc files, /dev nodes): default_view_paths().
  std::vector<std::string> optional;
  std::uint64_t tmpfs_size = 0;  // 0: no /tmp
  // The worker has a pid namespace of its own: /proc is a fresh procfs of that namespace.
  // Without one a fresh procfs would show every process of the host, so /proc holds only
  // the worker's own /proc/<pid> (kOwnProc).
  bool pid_namespace = false;
};

// The system paths a dynamically linked worker host, its plugin and glibc need: library
// directories, ld.so's cache and config, the name-service files, the time zone, and
// /dev/null, /dev/zero, /dev/urandom.
std::vector<std::string> default_view_paths();

// Plans the view: every path resolved component by component so that symlinks on the way
// are reproduced as symlinks (/lib -> usr/lib stays a symlink, its target is bound), a path
// already under a bound directory is not bound again, parents are created first, /proc is a
// fresh procfs with a pid namespace and the worker's own /proc/<pid> without (never the
// host's /proc), and /tmp is a tmpfs when tmpfs_size is non-zero. Fails when a
// required path is missing, is the root, or loops through symlinks.
Result<std::vector<MountOp>> plan_mount_view(const MountViewRequest& request, const ViewFs& fs);

}  // namespace sandpool::supervision
