// The launch contract between the manager and the worker host: the command line the
// spawner builds and the worker host parses, the fds it maps, the environment it passes,
// and the worker host's exit codes. Both sides include this header, so they cannot drift
// apart.
//
// What is not on the command line, because /proc/<pid>/cmdline is world-readable: the
// plugin config (it travels in the shared region, ipc::SharedRegion::create) and the
// manager's environment (the worker gets exactly worker_environment(), nothing else).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/sandbox/policy.hpp>

namespace sandpool::sandbox {

struct WorkerArgs {
  // The plugin's path as the manager opened it: its name in messages. The worker never
  // opens it: it loads the file the manager opened (plugin_fd), so the sandbox user needs
  // no access to the path, and the file checked is the file loaded.
  std::string plugin_path;
  int channel_fd = 3;                // the shared region's memfd
  int doorbell_fd = 4;               // the worker's end of the manager's doorbell
  int plugin_fd = 6;                 // the plugin file, opened read-only by the manager
  int plugin_dir_fd = 7;             // its directory (O_PATH): where $ORIGIN libraries are
  std::uint32_t heartbeat_ms = 250;  // the idle loop beats at least this often
  std::uint64_t max_result = 8u << 20;
  std::uint32_t init_timeout_ms = 10000;  // the worker's own alarm; the manager enforces it too
  // Not on the command line: the spawner writes it into the shared region, the worker host
  // reads it from there (to_argv leaves it out, parse_worker_argv leaves it "{}").
  std::string plugin_config_json = "{}";
  // The manager's pid. Step 1 checks that getppid() still names it after PR_SET_PDEATHSIG,
  // which closes the gap where the manager dies between spawn and that prctl. 0: trust the
  // parent seen when the worker host started.
  std::int32_t parent_pid = 0;
  // The read end of the placement gate, or -1: the worker host reads one byte from it before
  // anything else, so the manager can put it into its cgroups before any plugin code runs
  // (end of file instead of the byte: placement failed, the worker exits).
  int gate_fd = -1;
  // A pidfd of the manager, or -1. Steps 1 and 4 check it after PR_SET_PDEATHSIG: readable
  // means the manager has exited. Unlike getppid(), it also tells in a pid namespace, where
  // the parent is outside and getppid() is 0. Closed before any plugin code runs.
  int manager_pidfd = -1;
  SandboxPolicy policy;
};

// Returns argv[1..] for the worker host ("--plugin", path, ...).
std::vector<std::string> to_argv(const WorkerArgs& args);
// Parses argv[1..argc-1]; an unknown or malformed flag is an error naming it.
Result<WorkerArgs> parse_worker_argv(int argc, const char* const* argv);
// Returns true iff workers started from `a` and from `b` would be started alike: the same
// command line and the same plugin config.
bool same_launch(const WorkerArgs& a, const WorkerArgs& b);

// The worker host's whole environment, "NAME=value" for each variable of policy.keep_env
// that this process has set, in keep_env's order. The spawners exec with exactly this
// (execve's envp): nothing else of the manager's environment ever reaches the worker's
// memory or its /proc/<pid>/environ.
std::vector<std::string> worker_environment(const SandboxPolicy& policy);

// Exit codes of the worker host. The manager maps them to attempt outcomes and errors.
enum WorkerExit : int {
  kExitOk = 0,          // stopped when asked
  kExitUsage = 64,      // bad command line
  kExitChannel = 65,    // the shared region, its config or the doorbell could not be attached
  kExitLoad = 66,       // plugin file, symbol or ABI version refused
  kExitInit = 67,       // sp_plugin_init returned non-zero or timed out
  kExitLockdown = 68,   // a sandbox step failed (the step and call are in the log)
  kExitViolation = 69,  // the SIGSYS reporter (a forbidden syscall)
  // The worker found its task ring undecodable. The manager's frames are sound by
  // construction, so it is the worker's own view of the ring that is corrupt.
  kExitProtocol = 70,
  kExitMemory = 71,  // a task failed with the address space exhausted (RLIMIT_AS)
  // After a handler returned, the worker found its shared state broken (a header word or
  // ring index that only it writes, or the manager's fixed geometry): the handler scribbled
  // on it. The worker leaves before it answers or reads another task, so the attempt
  // charged is the one that ran that handler (worker_host/src/region_check.hpp).
  kExitRegionCorrupt = 72,
};

// Returns the syscall's name on this architecture ("openat"), or "syscall_<nr>".
std::string syscall_name(int nr);

}  // namespace sandpool::sandbox
