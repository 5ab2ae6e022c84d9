// The lock-down steps the worker host applies to itself after exec (docs/security.md,
// "The lock-down steps, in order"). Each step is one small function returning a Status whose
// message names the call that failed ("prctl(PR_SET_PDEATHSIG, SIGKILL): Operation not permitted");
// the worker host runs them in the documented order from one function and exits on the first
// failure (kExitLockdown). None of them logs or exits by itself.
//
// Thread-safety: run them from the process's only thread, before the plugin can start
// threads; the exceptions, run after init on the thread that ran it, are end_init_children,
// restrict_filesystem and install_seccomp (the last two reach every thread).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/sandbox/policy.hpp>

namespace sandpool::sandbox {

// Before step 1, when the manager gated the start: blocks until one byte arrives on
// `gate_fd` (the manager has put this process into its cgroups), then closes it. End of file
// means the manager gave up on it (placement failed, or the manager died): an error.
Status wait_for_placement(int gate_fd);

// Step 1. Asks for SIGKILL when the parent dies, then checks that the manager is still there
// (it may have died before the request; the kernel does not deliver the signal
// retroactively): `manager_pidfd` (a pidfd of the manager, -1 for none) must not be readable
// yet, and getppid() must still be `expected_parent`. In a pid namespace getppid() is 0 (the
// parent is outside it) and tells nothing: there the pidfd is the only check. Kernel quirk
// for the spawner: the signal follows the parent *thread*, so the manager must spawn from a
// thread that lives as long as it does. Changing credentials (step 4) clears the setting;
// that step must call this again.
Status set_parent_death_signal(pid_t expected_parent, int manager_pidfd = -1);

// Step 2a. Closes every fd except stdin/stdout/stderr and those in `keep` (close_range), so
// nothing the manager leaked (sockets, other workers' regions) is reachable from the plugin.
Status close_inherited_fds(std::vector<int> keep);

// Step 2b. clearenv() keeping only the variables named in `keep_env`; chdir("/"); umask(077);
// stdin from /dev/null; stdout/stderr left as inherited (the manager's log pipe), or pointed
// at /dev/null when the spawner left them closed, so no later fd can become fd 1 or 2.
Status reset_process_state(const std::vector<std::string>& keep_env);

// Step 3. Lowers each non-zero limit (soft and hard; RLIMIT_CPU keeps its hard limit one
// second above the soft one so SIGXCPU comes before SIGKILL) and always sets RLIMIT_CORE
// to 0. A limit above the inherited hard limit is clamped to it: this step only tightens.
Status apply_rlimits(const ResourceLimits& limits);

// Step 3, with the rlimits: oom_score_adj 1000, so that under memory pressure the kernel
// picks a worker before the manager or anything else on the host (raising it needs no
// privilege; it is inherited by the worker's forks).
Status raise_oom_score_adj();

// What step 4 did.
struct PrivilegeDrop {
  bool was_root = false;  // the worker host started with euid 0
  std::uint32_t uid = 0;  // the effective uid and gid afterwards
  std::uint32_t gid = 0;
};

// Step 4. When the process runs as root (euid 0) and `run_as` is set: setgroups to its
// supplementary groups, setresgid, then (while CAP_SETPCAP is still there) empties the
// capability bounding set with PR_CAPBSET_DROP, then setresuid. In every case: clears the
// ambient set, capset(2)s the permitted, effective and inheritable sets to empty (the raw
// syscall: no libcap) and sets PR_SET_DUMPABLE 0 (no ptrace, no core, /proc/<pid> owned by
// root). When root without `run_as` the uid stays 0 but without a single capability.
// Changing credentials clears PR_SET_PDEATHSIG: call set_parent_death_signal again after.
Result<PrivilegeDrop> drop_privileges(const std::optional<RunAs>& run_as);

// Step 5a. prctl(PR_SET_NO_NEW_PRIVS): exec can no longer grant privileges, and an
// unprivileged process may install a seccomp filter (the init layer, then step 7's) and
// restrict itself with Landlock (step 6). Kernel quirk: the flag is per thread, inherited
// by threads started later; set before the plugin is loaded, every thread of the plugin's
// init has it (Landlock needs it on each thread that restricts itself).
Status set_no_new_privs();

// Step 5a, after no_new_privs and before the plugin is loaded: the init layer, a first
// seccomp filter under which sp_plugin_init and every thread it starts run. Everything is
// allowed but creating processes (fork, vfork, clone without CLONE_THREAD: EPERM; clone3:
// ENOSYS, so glibc falls back to clone for threads), exec (execve, execveat: EPERM) and
// reaching into other processes (ptrace, process_vm_readv/writev: EPERM), and unless
// policy.init.network, the network (socket, io_uring_setup: EPERM). A call the
// pool's allow_syscalls names is left out (init_layer_exemptions): filters only tighten,
// so the layer would forbid it after init too. Nothing for SeccompProfile::kOff. The
// filter stays under step 7's, which comes last and whose traps win over these errors.
Status install_init_seccomp(const SandboxPolicy& policy);
// Returns the init layer's calls that the pool's allow_syscalls lets through, in init too.
std::vector<std::string> init_layer_exemptions(const SandboxPolicy& policy);

// Step 5a. prctl(PR_SET_CHILD_SUBREAPER): a process init starts and orphans (a double fork)
// comes back to the worker instead of to init(1), where end_init_children() finds it.
Status become_child_subreaper();

// Step 5c, after sp_plugin_init returned: reaps the children that exited, then kills
// (SIGKILL) and reaps every child still there, round after round as their own orphans come
// to the worker (the subreaper). Returns ok when init left no process; otherwise a kPlugin
// error naming the pids ("init left 1 process(es) running (pid 4242), now killed"). Only a
// pool whose allow_syscalls lets init create processes can get here (install_init_seccomp).
Status end_init_children();

// Landlock's availability: the kernel's ABI version (>= 1), or 0 and why not.
struct LandlockProbe {
  int abi = 0;
  std::string unavailable;  // when abi == 0: "the kernel has no Landlock (...)"
  // Threads other than the caller brought under the restriction too (threads the plugin's
  // init started); -1: /proc/self/task could not be read, only the caller is known to be.
  int other_threads = 0;
  bool kernel_tsync = false;  // the kernel restricted them all at once (Landlock ABI 8)
};
LandlockProbe probe_landlock();

// Step 6. Restricts the filesystem with Landlock to read-only access beneath each path of
// `readable` (directories or single files; each must exist), at the newest ABI both the
// kernel and this code know: no writing, creating, removing, linking or truncating
// anywhere, no reading elsewhere; from ABI 6 on, no signals and no abstract UNIX sockets
// beyond the sandbox either. `writable` paths are readable and writable beneath. Needs
// no_new_privs (step 5a) or CAP_SYS_ADMIN. Returns the ABI enforced. Without Landlock in
// the kernel it returns abi 0 and the reason, or kUnavailable when `required`.
// Every thread of the process is restricted, not only the caller: from Landlock ABI 8 by
// the kernel (LANDLOCK_RESTRICT_SELF_TSYNC); before, each other thread restricts itself
// from a signal handler (landlock_threads.hpp), and one that does not answer within 2 s is
// a kPlugin error. With `required` and no TSYNC, other threads are a kPlugin error instead.
Result<LandlockProbe> restrict_filesystem(const std::vector<std::string>& readable, bool required,
                                          const std::vector<std::string>& writable = {});

// Returns the directories of every shared object loaded in this process (dl_iterate_phdr),
// canonical and without duplicates: what the plugin's libraries need to stay readable.
// Objects loaded through /proc/self/fd/ are left out: their directory is the caller's to
// grant, by its fd.
std::vector<std::string> loaded_library_dirs();

// Installs the SIGSYS handler that the seccomp filter's default action (SCMP_ACT_TRAP)
// reaches: it stores the syscall number + 1 into *word (the shared header's
// violation_syscall), writes one line naming the number to stderr and _exit(kExitViolation).
// Call it right before install_seccomp (the plugin's init could replace it otherwise); the
// filter then kills any later attempt to change SIGSYS's disposition. `word` must stay
// mapped for the life of the process.
Status install_sigsys_reporter(std::atomic<std::uint32_t>* word);

// Step 7, before the filter, when denies_write_execute(policy): returns a kPlugin error naming
// the first mapping of /proc/self/maps that is both writable and executable (init made it;
// the filter stops only new ones), or a kSystem error when /proc/self/maps cannot be read.
Status check_no_writable_executable_mapping();

// Step 7, last. Loads the policy's seccomp filter (nothing for SeccompProfile::kOff): the
// profile's allow-list plus the per-pool `allow_syscalls`, every other syscall trapping into
// the SIGSYS reporter. With write-xor-execute (denies_write_execute), mmap, mprotect and
// pkey_mprotect asking for PROT_EXEC fail with EPERM instead of being allowed. An unknown
// name in allow_syscalls is kInvalidArgument naming it.
// Applies to every thread of the process (SECCOMP_FILTER_FLAG_TSYNC).
Status install_seccomp(const SandboxPolicy& policy);

}  // namespace sandpool::sandbox
