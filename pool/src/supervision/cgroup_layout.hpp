// Which cgroup layout this process lives in, read the way systemd and nsjail do: the mounts
// (/proc/self/mountinfo) say where each hierarchy is, /proc/self/cgroup says where this
// process sits in each. Pure parsing plus a few reads through the CgroupFs seam, so tests
// feed it text and a temporary tree.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>

#include "supervision/cgroup_fs.hpp"

namespace sandpool::supervision {

enum class CgroupVersion { kV1, kV2 };
std::string_view to_string(CgroupVersion v);  // "v1", "v2"

// Where per-worker cgroups go. v2: one directory; v1: one per controller hierarchy.
struct CgroupLayout {
  CgroupVersion version = CgroupVersion::kV2;
  std::string unified_dir;  // v2: this process's own cgroup (absolute path)
  // v1: controller ("memory", "pids", "cpu") -> this process's own cgroup in the hierarchy
  // that controller is mounted in. Only controllers that are mounted appear.
  std::map<std::string, std::string> v1_dirs;
};

struct CgroupSources {
  std::string mountinfo;    // /proc/self/mountinfo
  std::string self_cgroup;  // /proc/self/cgroup
  // Prepended to every mount point: "" on a real system, a temporary directory in tests.
  std::string root_prefix;
};

// Reads sources from /proc/self (root_prefix empty).
Result<CgroupSources> read_cgroup_sources(const CgroupFs& fs);

// Returns the layout to use: v2 when the unified hierarchy offers the memory and pids
// controllers in this process's cgroup (a pure v2 host, or a delegated sub-tree); else v1
// when the memory and pids hierarchies are mounted (v1 and hybrid hosts); else an error
// that says what is missing. Does not check writability (CgroupTree::open does).
Result<CgroupLayout> detect_cgroup_layout(const CgroupSources& sources, const CgroupFs& fs);

}  // namespace sandpool::supervision
