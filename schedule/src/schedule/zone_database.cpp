// Named time zones: a name checked as the tz database spells one, its TZif file opened
// beneath the database's root and bounded, parsed (tzif.cpp) and cached.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/schedule/time_zone.hpp>
#include <sandpool/schedule/tzif.hpp>

namespace sandpool {

namespace {

class NamedZone final : public TimeZone {
 public:
  NamedZone(std::string name, Tzif tzif) : name_(std::move(name)), tzif_(std::move(tzif)) {}
  std::string_view name() const override { return name_; }
  std::int64_t utc_offset(std::int64_t t) const override { return tzif_.utc_offset(t); }

 private:
  const std::string name_;
  const Tzif tzif_;
};

// Returns ok iff `name` is spelled as a tz database name.
Status check_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxZoneName) {
    return Status::invalid("a time zone name is 1-" + std::to_string(kMaxZoneName) + " bytes");
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' &&
        c != '+') {
      return Status::invalid(
          "a time zone name has only letters, digits, '/', '_', '-' and '+' (Europe/Berlin)");
    }
  }
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string_view::npos) {
    return Status::invalid("a time zone name is relative, its parts separated by one '/'");
  }
  return Status::ok();
}

// Opens `name` beneath the directory `root_fd` for reading. openat2's RESOLVE_BENEATH
// refuses any path, symlinks included, that resolves outside the root (the tree's aliases,
// US/Eastern -> ../America/New_York, stay inside). Kernels before 5.6 lack openat2: there
// the last component may not be a symlink, and the name's spelling (no '.', no leading '/')
// keeps the path inside the root unless a directory symlink in the tree leads out.
// O_NONBLOCK: a FIFO planted in the root does not block the open.
Result<UniqueFd> open_beneath(const UniqueFd& root_fd, const std::string& name) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  auto fd = posix_call("openat2(" + name + ", RESOLVE_BENEATH)", [&] {
    return static_cast<int>(::syscall(SYS_openat2, root_fd.get(), name.c_str(), &how, sizeof how));
  });
  if (!fd && fd.status().sys_errno() == ENOSYS) {
    fd = posix_call("openat(" + name + ")", [&] {
      return ::openat(root_fd.get(), name.c_str(),
                      O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    });
  }
  if (!fd) return fd.status();
  return UniqueFd(*fd);
}

// Returns the file's bytes: a regular file of at most kMaxTzifBytes (one byte more is read
// to see a file that grew past the cap since fstat).
Result<std::string> read_bounded(const UniqueFd& fd) {
  struct stat st {};
  if (auto r = posix_call("fstat", [&] { return ::fstat(fd.get(), &st); }); !r) return r.status();
  if (!S_ISREG(st.st_mode)) return Status::invalid("not a regular file");
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > kMaxTzifBytes) {
    return Status::invalid("over " + std::to_string(kMaxTzifBytes) + " bytes");
  }
  std::string bytes(static_cast<std::size_t>(st.st_size) + 1, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    auto n = posix_call("read", [&] { return ::read(fd.get(), &bytes[got], bytes.size() - got); });
    if (!n) return n.status();
    if (*n == 0) break;
    got += static_cast<std::size_t>(*n);
  }
  if (got > kMaxTzifBytes)
    return Status::invalid("over " + std::to_string(kMaxTzifBytes) + " bytes");
  bytes.resize(got);
  return bytes;
}

}  // namespace

ZoneDatabase::ZoneDatabase(std::string root) : root_(std::move(root)) {}

ZoneDatabase::~ZoneDatabase() = default;

Result<const TimeZone*> ZoneDatabase::zone(std::string_view name) const {
  if (name == "UTC") return &utc_zone();
  if (name == "local") return &local_zone();
  if (Status st = check_name(name); !st) {
    return Status::invalid("unknown time zone: " + st.message());
  }
  const std::string key(name);
  const std::string self = "time zone \"" + key + "\": ";
  {
    MutexLock lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second.get();
  }
  // Read and parsed outside the lock: two threads may both read a new zone; the first to
  // insert it wins and the other's copy is dropped.
  auto dir = posix_call("open(" + root_ + ")",
                        [&] { return ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); });
  if (!dir) return Status::invalid(self + "the zone root: " + dir.status().message());
  const UniqueFd root_fd(*dir);
  auto fd = open_beneath(root_fd, key);
  if (!fd) {
    if (fd.status().sys_errno() == ENOENT) {
      return Status::invalid("unknown time zone \"" + key + "\": no such zone under " + root_);
    }
    return Status::invalid(self + fd.status().message());
  }
  auto bytes = read_bounded(*fd);
  if (!bytes) return Status::invalid(self + root_ + "/" + key + ": " + bytes.status().message());
  auto tzif = parse_tzif(*bytes);
  if (!tzif) return Status::invalid(self + root_ + "/" + key + ": " + tzif.status().message());
  MutexLock lock(mu_);
  auto [it, added] = cache_.try_emplace(key, nullptr);
  if (added) it->second = std::make_unique<NamedZone>(key, std::move(*tzif));
  return it->second.get();
}

const ZoneDatabase& system_zones() {
  static const ZoneDatabase zones([] {
    const char* dir = std::getenv("TZDIR");
    return dir != nullptr && dir[0] == '/' ? std::string(dir) : std::string(kDefaultZoneRoot);
  }());
  return zones;
}

Result<const TimeZone*> zone_named(std::string_view name) { return system_zones().zone(name); }

}  // namespace sandpool
