#include "host_cgroups.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

namespace sandpool::hostile {
namespace {

namespace fs = std::filesystem;

struct Hierarchy {
  std::string mount_point;
  std::string root;                      // the hierarchy's path mounted there ("/" usually)
  std::vector<std::string> controllers;  // v1: the super options; empty: the unified one
  bool unified = false;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

// mountinfo escapes blanks and the like as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out.push_back(static_cast<char>(std::stoi(oct, nullptr, 8)));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Every cgroup and cgroup2 mount: "id parent maj:min root mount-point opts ... - type src super".
std::vector<Hierarchy> hierarchies() {
  std::vector<Hierarchy> out;
  std::istringstream lines(slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (tail[0] != "cgroup" && tail[0] != "cgroup2") continue;
    Hierarchy h{unescape(head[4]), unescape(head[3]), {}, tail[0] == "cgroup2"};
    if (!h.unified) h.controllers = split(tail[2], ',');
    out.push_back(std::move(h));
  }
  return out;
}

// Where `pid` sits in `h`, as a directory; "" when it cannot be seen from this mount.
std::string own_dir(const Hierarchy& h, pid_t pid) {
  std::istringstream lines(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path; the unified one is "0::path".
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (h.unified != controllers.empty()) continue;
    if (!h.unified) {
      const std::vector<std::string> named = split(controllers, ',');
      const bool all_there = std::all_of(named.begin(), named.end(), [&](const std::string& c) {
        return std::find(h.controllers.begin(), h.controllers.end(), c) != h.controllers.end();
      });
      if (!all_there) continue;
    }
    if (h.root != "/") {
      if (path.compare(0, h.root.size(), h.root) != 0) return "";
      path = path.substr(h.root.size());
    }
    if (path == "/") path.clear();
    return h.mount_point + path;
  }
  return "";
}

}  // namespace

std::string cgroup_dir_of(pid_t pid, const std::string& controller) {
  for (const Hierarchy& h : hierarchies()) {
    const bool match = controller.empty() ? h.unified
                                          : std::find(h.controllers.begin(), h.controllers.end(),
                                                      controller) != h.controllers.end();
    if (match) return own_dir(h, pid);
  }
  return "";
}

std::vector<std::string> worker_cgroup_roots_left() {
  const std::string name = "sandpool-" + std::to_string(::getpid());
  std::vector<std::string> left;
  for (const Hierarchy& h : hierarchies()) {
    std::string own = own_dir(h, ::getpid());
    if (own.empty()) continue;
    std::vector<std::string> candidates{own + "/" + name};
    // On v2 the manager may have moved itself into a leaf beside its workers' parent.
    if (fs::path(own).filename() == "sandpool-manager") {
      candidates.push_back(fs::path(own).parent_path().string() + "/" + name);
    }
    for (const std::string& c : candidates) {
      std::error_code ec;
      if (fs::is_directory(c, ec) && std::find(left.begin(), left.end(), c) == left.end()) {
        left.push_back(c);
      }
    }
  }
  return left;
}

std::string describe_cgroups(const std::string& dir) {
  auto line = [](const std::string& cgroup) {
    std::string procs = slurp(cgroup + "/cgroup.procs");
    std::replace(procs.begin(), procs.end(), '\n', ' ');
    return cgroup + ": pids [" + procs + "]\n";
  };
  std::string out = line(dir);
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_directory()) out += line(e.path().string());
  }
  return out;
}

void remove_cgroups(const std::string& dir) {
  std::vector<std::string> dirs{dir};
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_directory()) dirs.push_back(e.path().string());
  }
  // Deepest first: a cgroup with children cannot go.
  std::sort(dirs.begin(), dirs.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& d : dirs) {
    std::istringstream pids(slurp(d + "/cgroup.procs"));
    for (pid_t pid = 0; pids >> pid;) ::kill(pid, SIGKILL);
    ::rmdir(d.c_str());
  }
}

long long cgroup_value(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  if (!in) return -1;
  for (std::string line; std::getline(in, line);) {
    std::string_view v = line;
    if (!key.empty()) {
      if (v.size() <= key.size() || v.substr(0, key.size()) != key || v[key.size()] != ' ') {
        continue;
      }
      v.remove_prefix(key.size() + 1);
    }
    long long n = -1;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() ? n : -1;
  }
  return -1;
}

}  // namespace sandpool::hostile
