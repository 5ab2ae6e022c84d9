// The manager's half of step 4 (docs/security.md, "Privileges"): who the workers
// become when poold runs as root, and which plugin files root may hand to them. The
// worker's half, the drop itself, is drop_privileges in lockdown.hpp.
//
// Thread-safety: every function is reentrant (getpwnam_r, getgrouplist, stat).
#pragma once

#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/sandbox/policy.hpp>

namespace sandpool::sandbox {

// The user workers run as when poold is root and `sandbox.user` is not set.
inline constexpr std::string_view kDefaultSandboxUser = "nobody";

// Resolves `user` (sandbox.user) to numbers: a user name is looked up in the user database,
// giving its uid, primary gid and supplementary groups (getgrouplist); a decimal number is
// a uid, looked up the same way when the database knows it, and otherwise taken as
// uid = gid = that number with no supplementary groups (a uid reserved for sandboxes).
// kNotFound naming the user when a name is unknown; kInvalidArgument when `user` is empty
// or a number out of range.
Result<RunAs> resolve_run_as(std::string_view user);

// Returns ok iff neither the plugin file at `path` nor its directory is writable by group
// or others: code that root loads into a worker must not be replaceable by another user.
// kPermissionDenied naming the file or directory and its mode otherwise; kSystem naming
// the path when stat fails.
Status check_plugin_permissions(const std::string& path);
// The same check on the plugin as opened: `file_fd` and its directory `dir_fd` (O_PATH is
// enough), `path` naming them in messages. What the manager checks at each spawn and the
// worker again after dropping root, on the very file it loads.
Status check_plugin_permissions(int file_fd, int dir_fd, const std::string& path);

// Returns ok iff `who` may read the file at `path` by the mode bits that apply to who's
// uid, gid and groups (ACLs are not read). The directories above it need not be searchable:
// the worker gets the file opened by the manager (worker_args.hpp), and reopens it through
// /proc/self/fd, which checks the file's own permissions only. kPermissionDenied naming
// the file, its mode and owner, and what to do; kSystem naming the path when stat fails.
Status check_readable_by(const std::string& path, const RunAs& who, std::string_view who_name);

}  // namespace sandpool::sandbox
