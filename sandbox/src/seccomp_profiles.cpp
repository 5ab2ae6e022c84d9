#include "seccomp_profiles.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>

namespace sandpool::sandbox::detail {
namespace {

constexpr std::uint64_t kInt = 0xffffffffu;  // compare a C int argument on its low 32 bits

// open/openat flags that must all be clear apart from the access mode O_RDONLY: creating,
// truncating (Linux truncates even with O_RDONLY) and O_TMPFILE (whose flag bits include
// O_DIRECTORY, which alone is fine for reading directories).
constexpr std::uint64_t kOpenWriteBits = O_ACCMODE | O_CREAT | O_TRUNC | (O_TMPFILE & ~O_DIRECTORY);

// glibc's private signals (nptl/pthreadP.h): __SIGRTMIN and __SIGRTMIN + 1. SIGRTMIN
// itself is a function call in glibc, so the kernel's numbers are spelt out.
constexpr std::uint64_t kGlibcSigcancel = 32;
constexpr std::uint64_t kGlibcSigsetxid = 33;

constexpr SyscallRule kGuard[] = {
    // Changing SIGSYS's disposition would silence the reporter: kill on the spot. Other
    // signals fall to the default action (trap) unless a profile or the pool allows them.
    {.name = "rt_sigaction",
     .action = RuleAction::kKillProcess,
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = kInt,
     .value = SIGSYS},
    {.name = "sigaction",
     .action = RuleAction::kKillProcess,
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = kInt,
     .value = SIGSYS},
    // Arguments behind pointers cannot be filtered: answer ENOSYS so glibc falls back to
    // clone (pthread_create) and fstatat (stat family), whose arguments can be.
    {.name = "clone3", .action = RuleAction::kFailEnosys},
    {.name = "statx", .action = RuleAction::kFailEnosys},
};

constexpr SyscallRule kStrict[] = {
    // The task loop: futex waits and wakes, the eventfd doorbell and stdio (write), vDSO
    // clock fallbacks.
    {.name = "futex"},
    {.name = "write"},
    {.name = "clock_gettime"},
    {.name = "clock_nanosleep"},
    {.name = "nanosleep"},
    {.name = "sched_yield"},
    {.name = "restart_syscall"},
    // Leaving: _exit, the last thread's exit.
    {.name = "exit"},
    {.name = "exit_group"},
    // Signals: returning from a handler, masking, and abort()/raise() on itself only.
    {.name = "rt_sigreturn"},
    {.name = "rt_sigprocmask"},
    {.name = "tgkill", .match = ArgMatch::kOwnPid, .index = 0},
    // malloc and friends.
    {.name = "brk"},
    {.name = "mmap"},
    {.name = "munmap"},
    {.name = "mremap"},
    {.name = "madvise"},
    {.name = "mprotect"},
    // Identity and libc housekeeping. Each thread glibc starts registers rseq (2.35+) and
    // its robust-futex list first thing: a thread the plugin's init created can still be
    // starting when the filter arrives (TSYNC), so both are allowed even where new threads
    // are not.
    {.name = "getpid"},
    {.name = "gettid"},
    {.name = "rseq"},
    {.name = "set_robust_list"},
    {.name = "getrandom"},
    // stdio's first write fstat()s the stream.
    {.name = "fstat"},
    {.name = "newfstatat"},
};

constexpr SyscallRule kRelaxedExtra[] = {
    // Reading files: opening is allowed only for reading (see kOpenWriteBits).
    {.name = "openat",
     .match = ArgMatch::kMaskedEq,
     .index = 2,
     .mask = kOpenWriteBits,
     .value = O_RDONLY},
    {.name = "open",
     .match = ArgMatch::kMaskedEq,
     .index = 1,
     .mask = kOpenWriteBits,
     .value = O_RDONLY},
    {.name = "read"},
    {.name = "pread64"},
    {.name = "close"},
    {.name = "lseek"},
    {.name = "getdents64"},
    {.name = "stat"},
    {.name = "lstat"},
    // Threads: clone only with CLONE_THREAD (a fork() has it clear).
    {.name = "clone",
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = CLONE_THREAD,
     .value = CLONE_THREAD},
    // glibc's first pthread_create installs handlers for its internal signals (SIGCANCEL
    // and SIGSETXID, the first two real-time signals below SIGRTMIN).
    {.name = "rt_sigaction",
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = kInt,
     .value = kGlibcSigcancel},
    {.name = "rt_sigaction",
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = kInt,
     .value = kGlibcSigsetxid},
    {.name = "sigaltstack"},
    {.name = "sched_getaffinity"},
};

// Write-xor-execute, as systemd's MemoryDenyWriteExecute=, but stricter about mmap: no new
// executable mapping at all, not only no writable one, since a memfd or the shared region
// mapped twice (once writable, once executable) would be the same hole. prot is argument 2
// of all three (pkey_mprotect's pkey comes after it). EPERM rather than a trap: a JIT (PCRE2's)
// takes the refusal as "no JIT" and goes on interpreting.
constexpr SyscallRule kWriteXorExecute[] = {
    {.name = "mmap", .match = ArgMatch::kMaskedEq, .index = 2, .mask = PROT_EXEC, .value = 0},
    {.name = "mmap",
     .action = RuleAction::kFailEperm,
     .match = ArgMatch::kMaskedEq,
     .index = 2,
     .mask = PROT_EXEC,
     .value = PROT_EXEC},
    {.name = "mprotect", .match = ArgMatch::kMaskedEq, .index = 2, .mask = PROT_EXEC, .value = 0},
    {.name = "mprotect",
     .action = RuleAction::kFailEperm,
     .match = ArgMatch::kMaskedEq,
     .index = 2,
     .mask = PROT_EXEC,
     .value = PROT_EXEC},
    {.name = "pkey_mprotect",
     .match = ArgMatch::kMaskedEq,
     .index = 2,
     .mask = PROT_EXEC,
     .value = 0},
    {.name = "pkey_mprotect",
     .action = RuleAction::kFailEperm,
     .match = ArgMatch::kMaskedEq,
     .index = 2,
     .mask = PROT_EXEC,
     .value = PROT_EXEC},
};

// Loaded before the plugin, so they bind sp_plugin_init and every thread it starts. A
// refusal is an ordinary error to the plugin (EPERM), not a kill: a library that probes
// with fork() in its constructor still loads. They stay in force under the final filter,
// whose traps take precedence over these errors (a fork in handle is still reported as
// sandbox_violation: clone).
constexpr SyscallRule kInitLayer[] = {
    // New processes: fork()/vfork() and clone without CLONE_THREAD (glibc's fork, vfork,
    // posix_spawn, system). Threads (clone with CLONE_THREAD) stay allowed.
    {.name = "fork", .action = RuleAction::kFailEperm},
    {.name = "vfork", .action = RuleAction::kFailEperm},
    {.name = "clone",
     .action = RuleAction::kFailEperm,
     .match = ArgMatch::kMaskedEq,
     .index = 0,
     .mask = CLONE_THREAD,
     .value = 0},
    // clone3's flags sit behind a pointer: ENOSYS, so glibc falls back to clone for threads.
    {.name = "clone3", .action = RuleAction::kFailEnosys},
    // Replacing the worker host's image, or reaching into another process.
    {.name = "execve", .action = RuleAction::kFailEperm},
    {.name = "execveat", .action = RuleAction::kFailEperm},
    {.name = "ptrace", .action = RuleAction::kFailEperm},
    {.name = "process_vm_readv", .action = RuleAction::kFailEperm},
    {.name = "process_vm_writev", .action = RuleAction::kFailEperm},
};

// The init layer's network rules, unless the pool's sandbox.init.network allows it: no socket
// of any family (AF_UNIX too: a daemon's socket on the host is as much a way out as TCP),
// and no io_uring, whose IORING_OP_SOCKET and IORING_OP_CONNECT would make one without the
// socket call. socketpair stays: a connected pair reaches nothing outside the process.
constexpr SyscallRule kInitNoNetwork[] = {
    {.name = "socket", .action = RuleAction::kFailEperm},
    {.name = "socketcall", .action = RuleAction::kFailEperm},  // i386's multiplexer
    {.name = "io_uring_setup", .action = RuleAction::kFailEperm},
};

}  // namespace

std::span<const SyscallRule> guard_rules() { return kGuard; }
std::span<const SyscallRule> strict_rules() { return kStrict; }
std::span<const SyscallRule> relaxed_extra_rules() { return kRelaxedExtra; }
std::span<const SyscallRule> write_xor_execute_rules() { return kWriteXorExecute; }
std::span<const SyscallRule> init_layer_rules() { return kInitLayer; }
std::span<const SyscallRule> init_no_network_rules() { return kInitNoNetwork; }

}  // namespace sandpool::sandbox::detail
