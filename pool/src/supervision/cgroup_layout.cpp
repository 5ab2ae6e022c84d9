#include "supervision/cgroup_layout.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

namespace sandpool::supervision {
namespace {

struct Mount {
  std::string root;         // the hierarchy's path mounted there ("/" unless a bind mount)
  std::string mount_point;  // with the root prefix
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

// mountinfo escapes blanks, tabs, newlines and backslashes as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string_view oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string_view::npos) {
        out.push_back(static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Joins a mount with this process's path in its hierarchy. The path is relative to the
// hierarchy's root; a mount of a sub-tree (root != "/") shows only what lies under it.
Result<std::string> own_dir(const Mount& m, const std::string& path) {
  std::string rel = path;
  if (m.root != "/") {
    if (rel.compare(0, m.root.size(), m.root) != 0) {
      return Status::error(Code::kNotFound, "this process's cgroup " + path +
                                                " is outside the mounted sub-tree " + m.root);
    }
    rel = rel.substr(m.root.size());
  }
  if (rel == "/") rel.clear();
  return m.mount_point + rel;
}

}  // namespace

std::string_view to_string(CgroupVersion v) { return v == CgroupVersion::kV1 ? "v1" : "v2"; }

Result<CgroupSources> read_cgroup_sources(const CgroupFs& fs) {
  CgroupSources s;
  auto mounts = fs.read("/proc/self/mountinfo");
  if (!mounts) return mounts.status();
  auto self = fs.read("/proc/self/cgroup");
  if (!self) return self.status();
  s.mountinfo = std::move(mounts).value();
  s.self_cgroup = std::move(self).value();
  return s;
}

Result<CgroupLayout> detect_cgroup_layout(const CgroupSources& src, const CgroupFs& fs) {
  // mountinfo: id parent major:minor root mount-point options [optional...] - fstype source
  // super-options. v1 hierarchies name their controllers in the super options.
  std::optional<Mount> unified;
  std::map<std::string, Mount> v1;
  std::istringstream lines(src.mountinfo);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto head = split(std::string_view(line).substr(0, dash), ' ');
    const auto tail = split(std::string_view(line).substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    Mount m{unescape(head[3]), src.root_prefix + unescape(head[4])};
    if (tail[0] == "cgroup2") {
      if (!unified) unified = m;
    } else if (tail[0] == "cgroup") {
      for (std::string_view opt : split(tail[2], ',')) {
        if (opt == "memory" || opt == "pids" || opt == "cpu" || opt == "cpuacct") {
          v1.emplace(std::string(opt), m);
        }
      }
    }
  }
  // /proc/self/cgroup: hierarchy-id:controllers:path; the unified one is "0::path".
  std::optional<std::string> unified_path;
  std::map<std::string, std::string> v1_paths;
  std::istringstream groups(src.self_cgroup);
  for (std::string line; std::getline(groups, line);) {
    const auto parts = split(line, ':');
    if (parts.size() < 3) continue;
    const std::string path(line.substr(parts[0].size() + parts[1].size() + 2));
    if (parts[0] == "0" && parts[1].empty()) {
      unified_path = path;
      continue;
    }
    for (std::string_view c : split(parts[1], ',')) v1_paths.emplace(std::string(c), path);
  }

  std::string why_not_v2 = "no cgroup2 hierarchy is mounted";
  if (unified && unified_path) {
    auto dir = own_dir(*unified, *unified_path);
    if (!dir) {
      why_not_v2 = dir.status().message();
    } else {
      auto controllers = fs.read(*dir + "/cgroup.controllers");
      std::string list = controllers ? *controllers : std::string();
      std::replace(list.begin(), list.end(), '\n', ' ');
      const auto names = split(list, ' ');
      auto has = [&](std::string_view c) {
        return std::find(names.begin(), names.end(), c) != names.end();
      };
      if (controllers && has("memory") && has("pids")) {
        CgroupLayout layout;
        layout.version = CgroupVersion::kV2;
        layout.unified_dir = *dir;
        return layout;
      }
      why_not_v2 = "the cgroup2 hierarchy offers no memory and pids controllers in " + *dir;
    }
  }
  CgroupLayout layout;
  layout.version = CgroupVersion::kV1;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    auto m = v1.find(c);
    auto p = v1_paths.find(c);
    if (m == v1.end() || p == v1_paths.end()) continue;
    auto dir = own_dir(m->second, p->second);
    if (dir) layout.v1_dirs.emplace(c, *dir);
  }
  for (const char* required : {"memory", "pids"}) {
    if (layout.v1_dirs.count(required) == 0) {
      return Status::error(Code::kNotFound, "no usable cgroup layout: " + why_not_v2 +
                                                ", and no cgroup v1 " + required +
                                                " hierarchy is mounted");
    }
  }
  return layout;
}

}  // namespace sandpool::supervision
