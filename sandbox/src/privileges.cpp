// Step 4 of the worker's lock-down (drop_privileges, lockdown.hpp) and the manager's half
// of it (privileges.hpp): resolving sandbox.user and vetting the plugin file.
#include <sandpool/sandbox/privileges.hpp>

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/sandbox/lockdown.hpp>

namespace sandpool::sandbox {
namespace {

// getpwnam_r/getpwuid_r into a buffer that grows until the entry fits. Returns the entry's
// uid, gid and name, nullopt when the database has no such entry, or an error.
struct PasswdEntry {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string name;
};

template <typename Lookup>
Result<std::optional<PasswdEntry>> lookup_passwd(std::string_view what, Lookup&& lookup) {
  std::vector<char> buf(1024);
  for (;;) {
    passwd pw{};
    passwd* found = nullptr;
    const int rc = lookup(&pw, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 && rc != ENOENT && rc != ESRCH) {
      return Status::from_errno(rc, "getpwnam_r/getpwuid_r(" + std::string(what) + ")");
    }
    if (found == nullptr) return std::optional<PasswdEntry>();
    return std::optional<PasswdEntry>(PasswdEntry{pw.pw_uid, pw.pw_gid, pw.pw_name});
  }
}

Result<std::vector<std::uint32_t>> groups_of(const PasswdEntry& user) {
  int n = 32;
  std::vector<gid_t> groups;
  for (int round = 0; round < 8; ++round) {
    groups.resize(static_cast<std::size_t>(n));
    int count = n;
    if (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &count) >= 0) {
      groups.resize(static_cast<std::size_t>(count));
      return std::vector<std::uint32_t>(groups.begin(), groups.end());
    }
    n = count > n ? count : n * 2;  // count says how many there are
  }
  return Status::error(Code::kSystem, "getgrouplist(" + user.name + "): too many groups");
}

Result<RunAs> from_entry(const PasswdEntry& e) {
  Result<std::vector<std::uint32_t>> groups = groups_of(e);
  if (!groups) return groups.status();
  return RunAs{e.uid, e.gid, std::move(groups).value()};
}

}  // namespace

Result<RunAs> resolve_run_as(std::string_view user) {
  if (user.empty()) return Status::invalid("sandbox.user: empty user name");
  std::uint32_t number = 0;
  const char* end = user.data() + user.size();
  auto [ptr, ec] = std::from_chars(user.data(), end, number);
  if (ptr == end && ec == std::errc()) {
    if (number == static_cast<std::uint32_t>(-1)) {
      return Status::invalid("sandbox.user: " + std::string(user) + " is not a valid uid");
    }
    auto entry = lookup_passwd(user, [&](passwd* pw, char* buf, std::size_t len, passwd** out) {
      return ::getpwuid_r(number, pw, buf, len, out);
    });
    if (!entry) return entry.status();
    if (*entry) return from_entry(**entry);
    return RunAs{number, number, {}};
  }
  if (ec == std::errc::result_out_of_range) {
    return Status::invalid("sandbox.user: " + std::string(user) + " is not a valid uid");
  }
  const std::string name(user);
  auto entry = lookup_passwd(user, [&](passwd* pw, char* buf, std::size_t len, passwd** out) {
    return ::getpwnam_r(name.c_str(), pw, buf, len, out);
  });
  if (!entry) return entry.status();
  if (!*entry) {
    return Status::error(Code::kNotFound,
                         "sandbox.user: no user named '" + name + "' in the user database");
  }
  return from_entry(**entry);
}

namespace {

Status refuse_writable(const struct stat& st, const std::string& path, std::string_view what) {
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return Status::ok();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const char* who = (st.st_mode & S_IWOTH) != 0 ? "world-writable" : "group-writable";
  return Status::error(Code::kPermissionDenied,
                       std::string(what) + " " + path + " is " + who + " (mode " + mode +
                           "): refused when running as root (chmod go-w it)");
}

Status check_not_writable(const std::string& path, std::string_view what) {
  struct stat st {};
  auto r = posix_call("stat(" + path + ")", [&] { return ::stat(path.c_str(), &st); });
  if (!r) return r.status();
  return refuse_writable(st, path, what);
}

Status check_fd_not_writable(int fd, const std::string& path, std::string_view what) {
  struct stat st {};
  auto r = posix_call("fstat(" + path + ")", [&] { return ::fstat(fd, &st); });
  if (!r) return r.status();
  return refuse_writable(st, path, what);
}

std::string directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? "." : dir.string();
}

}  // namespace

Status check_plugin_permissions(const std::string& path) {
  SP_RETURN_IF_ERROR(check_not_writable(path, "plugin"));
  return check_not_writable(directory_of(path), "plugin directory");
}

Status check_plugin_permissions(int file_fd, int dir_fd, const std::string& path) {
  SP_RETURN_IF_ERROR(check_fd_not_writable(file_fd, path, "plugin"));
  return check_fd_not_writable(dir_fd, directory_of(path), "plugin directory");
}

Status check_readable_by(const std::string& path, const RunAs& who, std::string_view who_name) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::from_errno(errno, "stat(" + path + ")");
  if (who.uid == 0) return Status::ok();  // root reads regardless of the mode
  mode_t bit = S_IROTH;
  if (st.st_uid == who.uid) {
    bit = S_IRUSR;
  } else if (st.st_gid == who.gid ||
             std::find(who.groups.begin(), who.groups.end(), st.st_gid) != who.groups.end()) {
    bit = S_IRGRP;
  }
  if ((st.st_mode & bit) != 0) return Status::ok();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Status::error(Code::kPermissionDenied,
                       std::string(who_name) + " (uid " + std::to_string(who.uid) +
                           "), whom the workers become, cannot read " + path + " (mode " + mode +
                           ", owner uid " + std::to_string(st.st_uid) + ", gid " +
                           std::to_string(st.st_gid) +
                           "): make it readable (chmod o+r) or set sandbox.user");
}

// ---- step 4, inside the worker ---------------------------------------------------------

namespace {

// Empties the bounding set, so no later exec (of a file with capabilities) can regain any.
// Needs CAP_SETPCAP, so it runs while still root. The loop ends where the kernel's
// capabilities end (EINVAL), which avoids reading /proc/sys/kernel/cap_last_cap.
Status drop_bounding_set() {
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) {
      if (errno == EINVAL) return Status::ok();
      return Status::from_errno(errno, "prctl(PR_CAPBSET_READ, " + std::to_string(cap) + ")");
    }
    auto r = posix_call("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")",
                        [&] { return ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); });
    if (!r) return r.status();
  }
  return Status::ok();
}

// capset(2) with every set empty, through the raw syscall (no libcap).
Status clear_capability_sets() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  auto r = posix_call("capset(all empty)",
                      [&] { return static_cast<int>(::syscall(SYS_capset, &header, data)); });
  return r ? Status::ok() : r.status();
}

}  // namespace

Result<PrivilegeDrop> drop_privileges(const std::optional<RunAs>& run_as) {
  PrivilegeDrop done;
  done.was_root = ::geteuid() == 0;
  if (done.was_root && run_as) {
    const std::vector<gid_t> groups(run_as->groups.begin(), run_as->groups.end());
    auto g = posix_call("setgroups(" + std::to_string(groups.size()) + " groups)",
                        [&] { return ::setgroups(groups.size(), groups.data()); });
    if (!g) return g.status();
    const gid_t gid = run_as->gid;
    auto rg = posix_call("setresgid(" + std::to_string(gid) + ")",
                         [&] { return ::setresgid(gid, gid, gid); });
    if (!rg) return rg.status();
  }
  if (done.was_root) SP_RETURN_IF_ERROR(drop_bounding_set());
  if (done.was_root && run_as) {
    // Leaving uid 0 clears the permitted and effective sets (no SECBIT_KEEP_CAPS).
    const uid_t uid = run_as->uid;
    auto ru = posix_call("setresuid(" + std::to_string(uid) + ")",
                         [&] { return ::setresuid(uid, uid, uid); });
    if (!ru) return ru.status();
  }
  // Whoever we are now: no ambient, inheritable, permitted or effective capability.
  auto amb = posix_call("prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)",
                        [] { return ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); });
  if (!amb) return amb.status();
  SP_RETURN_IF_ERROR(clear_capability_sets());
  auto dump =
      posix_call("prctl(PR_SET_DUMPABLE, 0)", [] { return ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); });
  if (!dump) return dump.status();
  done.uid = ::geteuid();
  done.gid = ::getegid();
  return done;
}

}  // namespace sandpool::sandbox
