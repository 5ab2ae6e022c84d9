#include "supervision/mount_plan.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>

namespace sandpool::supervision {
namespace {

class PosixViewFs final : public ViewFs {
 public:
  PathInfo inspect(const std::string& path) const override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return {};
    PathInfo info;
    if (S_ISDIR(st.st_mode)) {
      info.kind = PathInfo::Kind::kDirectory;
    } else if (S_ISREG(st.st_mode)) {
      info.kind = PathInfo::Kind::kFile;
    } else if (S_ISCHR(st.st_mode)) {
      info.kind = PathInfo::Kind::kCharDevice;
    } else if (S_ISLNK(st.st_mode)) {
      info.kind = PathInfo::Kind::kSymlink;
      char buf[4096];
      const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
      if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return {};
      info.link_target.assign(buf, static_cast<std::size_t>(n));
    } else {
      info.kind = PathInfo::Kind::kOther;
    }
    return info;
  }
};

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string parent_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

MountOp op(MountOp::Kind kind, std::string target, std::string source = {}, bool device = false,
           std::uint64_t size = 0) {
  MountOp m;
  m.kind = kind;
  m.target = std::move(target);
  m.source = std::move(source);
  m.device = device;
  m.size = size;
  return m;
}

// What ends up at one path of the view.
enum class EntryKind { kBindDir, kBindFile, kBindDevice, kSymlink, kTmpfs, kProc, kOwnProc };
struct Entry {
  EntryKind kind;
  std::string link;
};

// Walks `path` one component at a time the way the kernel does, recording each symlink met
// on the way, and returns the real path reached (empty when it does not exist).
class Resolver {
 public:
  Resolver(const ViewFs& fs, std::map<std::string, Entry>& entries) : fs_(fs), entries_(entries) {}

  Result<std::string> resolve(const std::string& path, PathInfo::Kind* kind, int depth = 0) {
    if (depth > 32) return Status::invalid(path + ": too many levels of symbolic links");
    const std::vector<std::string> parts = split(path);
    std::string cur;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] == ".") continue;
      if (parts[i] == "..") {
        cur = cur.empty() ? cur : parent_of(cur);
        if (cur == "/") cur.clear();
        continue;
      }
      const std::string next = cur + "/" + parts[i];
      PathInfo info = fs_.inspect(next);
      if (info.kind == PathInfo::Kind::kMissing) return std::string();
      if (info.kind == PathInfo::Kind::kSymlink) {
        entries_.insert_or_assign(next, Entry{EntryKind::kSymlink, info.link_target});
        std::string target = info.link_target.starts_with('/')
                                 ? info.link_target
                                 : (cur.empty() ? "" : cur) + "/" + info.link_target;
        for (std::size_t k = i + 1; k < parts.size(); ++k) target += "/" + parts[k];
        return resolve(target, kind, depth + 1);
      }
      *kind = info.kind;
      cur = next;
    }
    if (cur.empty()) return Status::invalid(path + ": the whole root cannot be in the view");
    return cur;
  }

 private:
  const ViewFs& fs_;
  std::map<std::string, Entry>& entries_;
};

// True iff a strict ancestor of `path` is a directory bound as a whole.
bool under_bound_dir(const std::string& path, const std::map<std::string, Entry>& entries) {
  for (std::string p = parent_of(path); p != "/"; p = parent_of(p)) {
    auto it = entries.find(p);
    if (it != entries.end() && it->second.kind == EntryKind::kBindDir) return true;
  }
  return false;
}

}  // namespace

const ViewFs& posix_view_fs() {
  static const PosixViewFs fs;
  return fs;
}

std::vector<std::string> default_view_paths() {
  return {"/lib",
          "/lib32",
          "/lib64",
          "/libx32",
          "/usr/lib",
          "/usr/lib32",
          "/usr/lib64",
          "/usr/local/lib",
          "/etc/ld.so.cache",
          "/etc/ld.so.conf",
          "/etc/ld.so.conf.d",
          "/etc/nsswitch.conf",
          "/etc/passwd",
          "/etc/group",
          "/etc/hosts",
          "/etc/localtime",
          "/dev/null",
          "/dev/zero",
          "/dev/urandom"};
}

Result<std::vector<MountOp>> plan_mount_view(const MountViewRequest& request, const ViewFs& fs) {
  std::map<std::string, Entry> entries;  // ordered: an ancestor comes before its descendants
  Resolver resolver(fs, entries);
  auto add = [&](const std::string& path, bool required) -> Status {
    if (!path.starts_with('/')) return Status::invalid(path + ": not an absolute path");
    PathInfo::Kind kind = PathInfo::Kind::kMissing;
    Result<std::string> real = resolver.resolve(path, &kind);
    if (!real) return real.status();
    if (real->empty()) {
      return required ? Status::error(Code::kNotFound, path + ": no such file or directory")
                      : Status::ok();
    }
    EntryKind e = EntryKind::kBindFile;
    if (kind == PathInfo::Kind::kDirectory) e = EntryKind::kBindDir;
    if (kind == PathInfo::Kind::kCharDevice) e = EntryKind::kBindDevice;
    entries.insert_or_assign(*real, Entry{e, {}});
    return Status::ok();
  };
  for (const std::string& p : request.required) SP_RETURN_IF_ERROR(add(p, true));
  for (const std::string& p : request.optional) SP_RETURN_IF_ERROR(add(p, false));
  // Fresh mounts replace whatever the host has there.
  for (auto it = entries.begin(); it != entries.end();) {
    const bool shadowed = it->first == "/proc" || it->first.starts_with("/proc/") ||
                          (request.tmpfs_size != 0 && it->first == "/tmp");
    it = shadowed ? entries.erase(it) : std::next(it);
  }
  entries.insert_or_assign(
      "/proc", Entry{request.pid_namespace ? EntryKind::kProc : EntryKind::kOwnProc, {}});
  if (request.tmpfs_size != 0) entries.insert_or_assign("/tmp", Entry{EntryKind::kTmpfs, {}});

  std::vector<MountOp> ops;
  std::set<std::string> made = {"/"};
  auto mkdirs = [&](const std::string& dir) {
    std::vector<std::string> chain;
    for (std::string p = dir; made.count(p) == 0; p = parent_of(p)) chain.push_back(p);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      ops.push_back(op(MountOp::Kind::kMkdir, *it));
      made.insert(*it);
    }
  };
  for (const auto& [path, entry] : entries) {
    if (under_bound_dir(path, entries)) continue;  // already visible through its ancestor
    mkdirs(parent_of(path));
    switch (entry.kind) {
      case EntryKind::kBindDir:
        mkdirs(path);
        ops.push_back(op(MountOp::Kind::kBind, path));
        break;
      case EntryKind::kBindFile:
      case EntryKind::kBindDevice:
        ops.push_back(op(MountOp::Kind::kTouch, path));
        ops.push_back(op(MountOp::Kind::kBind, path, "", entry.kind == EntryKind::kBindDevice));
        break;
      case EntryKind::kSymlink:
        ops.push_back(op(MountOp::Kind::kSymlink, path, entry.link));
        break;
      case EntryKind::kTmpfs:
        mkdirs(path);
        ops.push_back(op(MountOp::Kind::kTmpfs, path, "", false, request.tmpfs_size));
        break;
      case EntryKind::kProc:
        mkdirs(path);
        ops.push_back(op(MountOp::Kind::kProc, path));
        break;
      case EntryKind::kOwnProc:
        mkdirs(path);
        ops.push_back(op(MountOp::Kind::kOwnProc, path));
        break;
    }
  }
  return ops;
}

}  // namespace sandpool::supervision
