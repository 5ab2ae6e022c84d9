// The worker host's whole life in one function: the lock-down steps of docs/security.md
// ("The lock-down steps, in order") in their documented order, then the task loop.
#pragma once

#include <sys/types.h>

#include <sandpool/sandbox/worker_args.hpp>

namespace sandpool::worker {

// Runs the worker described by `args`; `spawner` is the parent pid seen at exec (step 1
// checks it is still the parent). Never returns: it leaves with _exit and one of
// sandbox::WorkerExit's codes, because after seccomp the process may no longer close fds or
// run arbitrary destructors. Every failing step prints its reason, naming the call, to
// stderr and, once the channel is attached, sends it to the manager as an error LogMsg.
[[noreturn]] void run_worker(const sandbox::WorkerArgs& args, pid_t spawner);

}  // namespace sandpool::worker
