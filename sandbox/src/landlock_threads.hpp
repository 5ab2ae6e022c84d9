// Step 6b for the threads the plugin's init left: landlock_restrict_self binds the calling
// thread only (before Linux 7.0's LANDLOCK_RESTRICT_SELF_TSYNC), so each other thread is
// asked, by a signal, to restrict itself. Private to sp_sandbox (and its tests).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool::sandbox::detail {

// The Landlock ABI from which landlock_restrict_self(LANDLOCK_RESTRICT_SELF_TSYNC) restricts
// every thread of the process at once (Linux 7.0), and the flag.
inline constexpr int kLandlockTsyncAbi = 8;
inline constexpr unsigned kLandlockRestrictSelfTsync = 1u << 3;

// The signal the sweep sends: SIGRTMIN + 5 (the backtrace request is SIGRTMIN + 4).
int landlock_sweep_signal();

// A thread of this process, by the id gettid() and tgkill know (this process's pid
// namespace), and by its name under /proc/self/task. The two differ when /proc belongs to an
// ancestor pid namespace: a worker in a pid namespace without a mount namespace sees the
// host's /proc.
struct ThreadId {
  pid_t tid = 0;
  pid_t proc_id = 0;
};

// Returns every thread of this process but the caller (/proc/self/task, the local ids from
// each thread's NSpid), or nullopt when /proc/self/task cannot be read.
std::optional<std::vector<ThreadId>> other_threads();

// Brings every thread of this process but the caller under `ruleset_fd`: each is sent
// landlock_sweep_signal(), whose handler (installed for the sweep, the previous disposition
// restored after) calls landlock_restrict_self on that thread. Threads started meanwhile
// are swept in further rounds; then, for at most 250 ms, each is waited for until it sleeps
// again, so that a call the signal interrupted has restarted before the caller goes on (to
// the seccomp filter). Each thread needs no_new_privs, which it inherited when the
// worker set it before the plugin was loaded. Returns how many threads restricted
// themselves; an error naming the threads when one did not answer within `patience` (it
// blocks the signal, or is stuck in the kernel), when one's restriction failed, or when
// threads kept appearing. The answers are words the threads write in this process's
// memory: code of the plugin that runs meanwhile could forge them (docs/security.md).
Result<int> restrict_sibling_threads(int ruleset_fd, std::chrono::milliseconds patience);

}  // namespace sandpool::sandbox::detail
