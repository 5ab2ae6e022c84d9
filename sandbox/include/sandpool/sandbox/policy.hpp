// The sandbox policy: a plain value type the manager fills from its config and hands to
// the worker host on its command line (worker_args.hpp). The lock-down steps that apply
// it run inside the worker (lockdown.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/sandbox/namespaces.hpp>

namespace sandpool::sandbox {

// strict: the task loop's syscalls only. relaxed: adds reading files and threads.
// off: no filter at all (debugging; logged loudly).
enum class SeccompProfile { kStrict, kRelaxed, kOff };
std::string_view profile_name(SeccompProfile p);
std::optional<SeccompProfile> parse_profile(std::string_view name);

// rlimits applied in step 3. 0 means "leave as inherited".
struct ResourceLimits {
  std::uint64_t address_space = 0;  // bytes (RLIMIT_AS)
  std::uint64_t cpu_seconds = 0;    // RLIMIT_CPU: a lifetime backstop, not the per-task limit
  std::uint64_t open_files = 64;    // RLIMIT_NOFILE
  std::uint64_t processes = 0;      // RLIMIT_NPROC (not enforced for root: see docs/security.md)
  std::uint64_t file_size = 0;      // RLIMIT_FSIZE (SIGXFSZ past it)
};

struct SandboxPolicy {
  SeccompProfile profile = SeccompProfile::kStrict;
  std::vector<std::string> allow_syscalls;  // per-pool additions, by name
  ResourceLimits limits;
  std::vector<std::string> keep_env;  // environment variables kept by clearenv
  // Applied by the spawner (clone3), not by the worker host: not on its command line.
  NamespacePolicy namespaces;
};

// The isolation a worker runs under, as `poolctl workers` shows it:
// "ns:user,pid,net,ipc,uts,mnt+rlimits+seccomp:strict" ("rlimits+seccomp:strict" without
// namespaces). `namespaces` is the set actually in effect, not the one asked for.
std::string describe_isolation(const SandboxPolicy& policy, NamespaceSet namespaces);

}  // namespace sandpool::sandbox
