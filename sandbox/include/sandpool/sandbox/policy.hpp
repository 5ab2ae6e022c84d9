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

// rlimits applied in step 3. 0 means "no limit" (left as inherited). The defaults are the
// safe ones every pool starts from (docs/configuration.md, `limits`).
struct ResourceLimits {
  std::uint64_t address_space = 1ull << 30;  // bytes (RLIMIT_AS); 1 GiB
  // RLIMIT_CPU, seconds: a lifetime backstop, not the per-task limit. A pool derives it from
  // its timeouts when it is 0 here (worker_cpu_seconds, <sandpool/pool/pool_options.hpp>).
  std::uint64_t cpu_seconds = 0;
  std::uint64_t open_files = 64;  // RLIMIT_NOFILE
  // RLIMIT_NPROC: per user, and not enforced for root (see docs/security.md)
  std::uint64_t processes = 256;
  std::uint64_t file_size = 1ull << 30;  // bytes (RLIMIT_FSIZE, SIGXFSZ past it); 1 GiB
  bool operator==(const ResourceLimits&) const = default;
};

// Returns the names of the limits `limits` leaves off (0), in the config's words
// ("memory", "processes", "file_size", "open_files"): what a pool warns about at start.
std::vector<std::string> unlimited_resources(const ResourceLimits& limits);

// Per-worker cgroups (docs/security.md, "cgroups"). off: none (rlimits only). auto: when the
// host lets the manager make them, else a warning and rlimits only. required: a pool whose
// workers cannot get their cgroups does not start.
enum class CgroupMode { kOff, kAuto, kRequired };
std::string_view cgroup_mode_name(CgroupMode m);
// Step 4's target identity, as numbers: the manager resolves `sandbox.user` once
// (resolve_run_as, privileges.hpp), because the worker's view of /etc may be restricted.
struct RunAs {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  // supplementary groups; empty: none
  bool operator==(const RunAs&) const = default;
};

// What the plugin's init may reach besides its own files (its directory and the libraries
// loaded with it) and readonly_paths (`sandbox.init`, docs/security.md "Init").
struct InitAccess {
  // Readable during init only (Landlock, kernel permitting): where a plugin's init reads from,
  // such as the Python plugin's standard library and handler modules.
  std::vector<std::string> read_paths;
  // Readable and writable during init only: a file init opens for writing (a log, a cache)
  // keeps its fd afterwards. Not shown in a mount namespace's view (there, the view's /tmp).
  std::vector<std::string> write_paths;
  // Init may create sockets. false: the init seccomp layer refuses socket and io_uring_setup
  // (EPERM), so init connects nowhere, not even to 127.0.0.1.
  bool network = false;
  bool operator==(const InitAccess&) const = default;
};

struct SandboxPolicy {
  SeccompProfile profile = SeccompProfile::kStrict;
  std::vector<std::string> allow_syscalls;  // per-pool additions, by name
  ResourceLimits limits;
  std::vector<std::string> keep_env;  // environment variables kept by clearenv
  // Manager-side only (not on the worker's command line): with a cgroup, its memory limit is
  // limits.address_space (RLIMIT_AS is then not set), its pids.max limits.processes.
  CgroupMode cgroup = CgroupMode::kOff;
  double cpu_quota = 0;  // CPUs a worker may use (cpu.max / cfs quota; 0.5 = half a CPU); 0: none
  // Step 4: when set and the worker host runs as root (euid 0), it drops to this identity
  // and every capability. Unset: no identity change (capabilities still go when root).
  std::optional<RunAs> run_as;
  // Step 6: what Landlock leaves readable after init, besides the plugin's directory and
  // the directories of every loaded library. Everything else is neither readable nor
  // writable.
  std::vector<std::string> readonly_paths;
  // Step 6: readable and writable under Landlock. The manager fills it, not the config: the
  // private /tmp of a mount namespace.
  std::vector<std::string> writable_paths;
  // Isolation layers whose absence is fatal instead of a warning (`sandbox.require`). The
  // worker acts on "landlock"; other names (namespaces) belong to the spawner.
  std::vector<std::string> require;
  // Applied by the spawner (clone3), not by the worker host: not on its command line.
  NamespacePolicy namespaces;
  // Write-xor-execute after ready (`sandbox.write_xor_execute`), as systemd's
  // MemoryDenyWriteExecute=: step 7's filter refuses (EPERM) mmap, mprotect and pkey_mprotect
  // asking for PROT_EXEC, and a worker whose init left a mapping both writable and executable
  // is refused. Unset: the profile's default (denies_write_execute).
  std::optional<bool> write_xor_execute;
  // Step 5: what init may reach (Landlock and the init seccomp layer).
  InitAccess init;
  bool operator==(const SandboxPolicy&) const = default;
};

// Returns true iff step 7 enforces write-xor-execute: policy.write_xor_execute when set, else
// true under strict; never under off (there is no filter).
bool denies_write_execute(const SandboxPolicy& policy);

// Returns true iff `layer` is named in policy.require.
bool requires_layer(const SandboxPolicy& policy, std::string_view layer);

// The isolation a worker runs under as the manager configures it:
// "ns:user,pid,net,ipc,uts,mnt+rlimits+seccomp:strict" ("rlimits+seccomp:strict" without
// namespaces). `namespaces` is the set actually in effect, not the one asked for.
std::string describe_isolation(const SandboxPolicy& policy, NamespaceSet namespaces);

}  // namespace sandpool::sandbox
