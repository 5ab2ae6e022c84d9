// What /proc says about a worker process: its resident memory and CPU time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sandpool::supervision {

// Resident set size in bytes (/proc/<pid>/statm), 0 when it cannot be read.
std::uint64_t rss_bytes(pid_t pid);
// Time the process's threads have spent on a CPU, ns (/proc/<pid>/schedstat of its main
// thread is per thread, so this sums /proc/<pid>/task/*/schedstat), -1 when unreadable.
std::int64_t cpu_ns(pid_t pid);
// The ids of the process's threads (/proc/<pid>/task), the main thread (tid == pid) first,
// at most `max`. Empty when the process is gone.
std::vector<pid_t> thread_ids(pid_t pid, std::size_t max);

}  // namespace sandpool::supervision
