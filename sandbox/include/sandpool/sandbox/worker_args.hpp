// The launch contract between the manager and the worker host: the command line the
// spawner builds and the worker host parses, and the worker host's exit codes. Both sides
// include this header, so they cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/sandbox/policy.hpp>
#include <sandpool/status.hpp>

namespace sandpool::sandbox {

struct WorkerArgs {
  std::string plugin_path;
  int channel_fd = 3;                // the shared region's memfd
  int doorbell_fd = 4;               // eventfd the worker signals to wake the manager
  std::uint32_t heartbeat_ms = 250;  // the idle loop beats at least this often
  std::uint64_t max_result = 8u << 20;
  std::uint32_t init_timeout_ms = 10000;  // the worker's own alarm; the manager enforces it too
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

// Exit codes of the worker host. The manager maps them to attempt outcomes and errors.
enum WorkerExit : int {
  kExitOk = 0,          // stopped when asked
  kExitUsage = 64,      // bad command line
  kExitChannel = 65,    // the shared region or doorbell could not be attached
  kExitLoad = 66,       // plugin file, symbol or ABI version refused
  kExitInit = 67,       // sp_plugin_init returned non-zero or timed out
  kExitLockdown = 68,   // a sandbox step failed (the step and call are in the log)
  kExitViolation = 69,  // the SIGSYS reporter (a forbidden syscall)
  kExitProtocol = 70,   // the manager sent something undecodable
  kExitMemory = 71,     // a task failed with the address space exhausted (RLIMIT_AS)
};

// Returns the syscall's name on this architecture ("openat"), or "syscall_<nr>".
std::string syscall_name(int nr);

}  // namespace sandpool::sandbox
