// Step 6b of the worker's lock-down: Landlock, through the raw syscalls (glibc has no
// wrappers). The ABI is probed at run time and only the rights it knows are requested.
#include <sandpool/sandbox/lockdown.hpp>

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/unique_fd.hpp>

#include "landlock_access.hpp"
#include "landlock_threads.hpp"

namespace sandpool::sandbox {
namespace detail {

LandlockAccess landlock_access_for_abi(int kernel_abi) {
  LandlockAccess a;
  a.abi = std::min(kernel_abi, kNewestKnownAbi);
  if (a.abi < 1) return LandlockAccess{};
  a.handled_fs = (kFsMakeSym << 1) - 1;  // ABI 1: bits 0 to 12
  if (a.abi >= 2) a.handled_fs |= kFsRefer;
  if (a.abi >= 3) a.handled_fs |= kFsTruncate;
  if (a.abi >= 5) a.handled_fs |= kFsIoctlDev;
  a.read_file = kFsReadFile;
  a.read_dir = kFsReadFile | kFsReadDir;
  if (a.abi >= 6) a.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  // landlock_ruleset_attr grew by one __u64 at ABI 4 (handled_access_net) and at ABI 6
  // (scoped); an older kernel refuses a larger struct only when the extra bytes are set,
  // but passing the size the ABI defines is the documented way.
  a.ruleset_attr_size = a.abi >= 6 ? 24 : a.abi >= 4 ? 16 : 8;
  return a;
}

}  // namespace detail

namespace {

using detail::LandlockAccess;

// The kernel's structs (include/uapi/linux/landlock.h), newest layout.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
constexpr unsigned kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

}  // namespace

LandlockProbe probe_landlock() {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  if (abi > 0) return {static_cast<int>(abi), {}};
  switch (errno) {
    case ENOSYS:
      return {0, "the kernel has no Landlock (landlock_create_ruleset: ENOSYS; Linux >= 5.13)"};
    case EOPNOTSUPP:
      return {0, "Landlock is disabled on this kernel (add landlock to the lsm= boot parameter)"};
    default:
      return {0, std::string("landlock_create_ruleset(VERSION): ") + std::strerror(errno)};
  }
}

std::vector<std::string> loaded_library_dirs() {
  std::vector<std::string> dirs;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        // The main program is "", the vDSO has no path: only absolute names are files.
        if (info->dlpi_name == nullptr || info->dlpi_name[0] != '/') return 0;
        // Loaded through an fd (the plugin, the libraries beside it): the caller grants
        // their directory by its fd; its path may not even be reachable.
        if (std::strncmp(info->dlpi_name, "/proc/self/fd/", 14) == 0) return 0;
        std::error_code ec;
        std::filesystem::path p = std::filesystem::canonical(info->dlpi_name, ec);
        if (ec) p = info->dlpi_name;
        static_cast<std::vector<std::string>*>(out)->push_back(p.parent_path().string());
        return 0;
      },
      &dirs);
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

namespace {

// Grants read-only access beneath `path` (a directory, or a single file), or every right the
// ruleset handles when `writable` (on a single file, the file rights: writing and truncating).
Status allow(int ruleset, const std::string& path, const LandlockAccess& access, bool writable) {
  auto opened = posix_call("open(" + path + ", O_PATH)",
                           [&] { return ::open(path.c_str(), O_PATH | O_CLOEXEC); });
  if (!opened) return opened.status();
  UniqueFd fd(*opened);
  struct stat st {};
  auto stated = posix_call("fstat(" + path + ")", [&] { return ::fstat(fd.get(), &st); });
  if (!stated) return stated.status();
  PathBeneathAttr rule{};
  if (S_ISDIR(st.st_mode)) {
    rule.allowed_access = writable ? access.handled_fs : access.read_dir;
  } else {
    rule.allowed_access =
        access.read_file |
        (writable ? access.handled_fs & (detail::kFsWriteFile | detail::kFsTruncate) : 0);
  }
  rule.parent_fd = fd.get();
  auto added = posix_call("landlock_add_rule(" + path + ")", [&] {
    return static_cast<int>(::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0));
  });
  return added ? Status::ok() : added.status();
}

Status restrict_self(int ruleset, unsigned flags) {
  auto restricted = posix_call(
      flags == 0 ? "landlock_restrict_self" : "landlock_restrict_self(TSYNC)",
      [&] { return static_cast<int>(::syscall(SYS_landlock_restrict_self, ruleset, flags)); });
  return restricted ? Status::ok() : restricted.status();
}

// How long a thread of the plugin's init has to answer the sweep's signal.
constexpr std::chrono::milliseconds kSweepPatience{2000};

// Restricts the calling thread and every other thread of the process: at once through the
// kernel when it can (TSYNC), else each other thread by itself (the sweep) and then the
// caller. With `required`, and without TSYNC, other threads are refused instead: only the
// kernel's own restriction is beyond the plugin's reach.
Status restrict_every_thread(int ruleset, int kernel_abi, bool required, LandlockProbe* probe) {
  const std::optional<std::vector<detail::ThreadId>> others = detail::other_threads();
  probe->other_threads = others ? static_cast<int>(others->size()) : -1;
  if (kernel_abi >= detail::kLandlockTsyncAbi) {
    probe->kernel_tsync = true;
    return restrict_self(ruleset, detail::kLandlockRestrictSelfTsync);
  }
  if (others && !others->empty() && required) {
    return Status::error(
        Code::kPlugin,
        std::to_string(others->size()) +
            " thread(s) started by the plugin's init are running, and this kernel (Landlock "
            "ABI " +
            std::to_string(kernel_abi) +
            ") cannot restrict other threads itself (LANDLOCK_RESTRICT_SELF_TSYNC needs ABI " +
            std::to_string(detail::kLandlockTsyncAbi) +
            "): with sandbox.require: [landlock] init may not leave threads running");
  }
  if (!others && required) {
    return Status::error(Code::kUnavailable,
                         "cannot list the worker's threads (/proc/self/task) to restrict them "
                         "all, and Landlock is required (sandbox.require)");
  }
  if (others && !others->empty()) {
    Result<int> swept = detail::restrict_sibling_threads(ruleset, kSweepPatience);
    if (!swept) return swept.status();
    probe->other_threads = *swept;
  }
  return restrict_self(ruleset, 0);
}

}  // namespace

Result<LandlockProbe> restrict_filesystem(const std::vector<std::string>& readable, bool required,
                                          const std::vector<std::string>& writable) {
  LandlockProbe probe = probe_landlock();
  if (probe.abi == 0) {
    if (required) {
      return Status::error(
          Code::kUnavailable,
          "Landlock is required (sandbox.require) but unavailable: " + probe.unavailable);
    }
    return probe;
  }
  const int kernel_abi = probe.abi;
  const LandlockAccess access = detail::landlock_access_for_abi(probe.abi);
  probe.abi = access.abi;
  RulesetAttr attr{access.handled_fs, 0, access.scoped};
  auto created = posix_call("landlock_create_ruleset", [&] {
    return static_cast<int>(
        ::syscall(SYS_landlock_create_ruleset, &attr, access.ruleset_attr_size, 0));
  });
  if (!created) return created.status();
  UniqueFd ruleset(*created);
  for (const std::string& path : readable) {
    SP_RETURN_IF_ERROR(allow(ruleset.get(), path, access, false));
  }
  for (const std::string& path : writable) {
    SP_RETURN_IF_ERROR(allow(ruleset.get(), path, access, true));
  }
  SP_RETURN_IF_ERROR(restrict_every_thread(ruleset.get(), kernel_abi, required, &probe));
  return probe;
}

}  // namespace sandpool::sandbox
