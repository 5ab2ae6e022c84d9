// Which Landlock access rights exist at each ABI version, as data, so step 6 asks the
// kernel only for rights it knows (an unknown bit makes landlock_create_ruleset fail with
// EINVAL). The values are the kernel's (include/uapi/linux/landlock.h); they are spelt out
// here because Debian 12's headers stop at ABI 2. Private to sp_sandbox (and its tests).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sandpool::sandbox::detail {

// Filesystem rights, ABI 1 unless noted.
inline constexpr std::uint64_t kFsExecute = 1ull << 0;
inline constexpr std::uint64_t kFsWriteFile = 1ull << 1;
inline constexpr std::uint64_t kFsReadFile = 1ull << 2;
inline constexpr std::uint64_t kFsReadDir = 1ull << 3;
inline constexpr std::uint64_t kFsMakeSym = 1ull << 12;   // the last of ABI 1
inline constexpr std::uint64_t kFsRefer = 1ull << 13;     // ABI 2
inline constexpr std::uint64_t kFsTruncate = 1ull << 14;  // ABI 3
inline constexpr std::uint64_t kFsIoctlDev = 1ull << 15;  // ABI 5
// Scopes (ABI 6): no connecting to abstract UNIX sockets, and no signals, outside the
// sandbox's own Landlock domain.
inline constexpr std::uint64_t kScopeAbstractUnixSocket = 1ull << 0;
inline constexpr std::uint64_t kScopeSignal = 1ull << 1;

// The newest ABI whose rights this table knows; a newer kernel is used at this level.
inline constexpr int kNewestKnownAbi = 7;

struct LandlockAccess {
  int abi = 0;                        // the ABI used (the kernel's, capped at kNewestKnownAbi)
  std::uint64_t handled_fs = 0;       // every filesystem right: denied unless a rule allows it
  std::uint64_t read_dir = 0;         // what a read-only rule grants on a directory
  std::uint64_t read_file = 0;        // ... on a file (directory rights are EINVAL there)
  std::uint64_t scoped = 0;           // ABI 6 scopes
  std::size_t ruleset_attr_size = 0;  // bytes of landlock_ruleset_attr this ABI reads
};

// Returns the rights to request at `kernel_abi` (>= 1). Network rights (ABI 4) are left
// unhandled: whether a plugin may use the network is seccomp's and the net namespace's call.
LandlockAccess landlock_access_for_abi(int kernel_abi);

}  // namespace sandpool::sandbox::detail
