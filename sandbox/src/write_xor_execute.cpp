// Step 7's write-xor-execute check: no mapping both writable and executable survives init.
#include <sandpool/sandbox/lockdown.hpp>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

namespace sandpool::sandbox {

Status check_no_writable_executable_mapping() {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return Status::from_errno(errno != 0 ? errno : ENOENT, "open(/proc/self/maps)");
  // Each line: "start-end perms offset dev inode [path]", perms like "rwxp".
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, path);
    if (perms.size() < 3 || perms[1] != 'w' || perms[2] != 'x') continue;
    return Status::error(
        Code::kPlugin, "a mapping both writable and executable is left after init (" + range + " " +
                           perms + " " + (path.empty() ? "anonymous" : path) +
                           "), which sandbox.write_xor_execute forbids: the plugin must map "
                           "its code read-and-execute only, or the pool set "
                           "write_xor_execute: false");
  }
  return Status::ok();
}

}  // namespace sandpool::sandbox
