// Crash points (issue 34): a path that moves a task between the journal, the dead letters and
// a pool is run by `poold_faults` (poold with the fault VFS of tests/poold/sqlite_fault_vfs.cpp)
// once to count its SQLite write points K, then once per point N in 1..K with
// SANDPOOL_SQLITE_FAULT=crash@N, each time from a copy of the same prepared state dir; after
// each crash the plain poold starts on that state dir and every task the path touched must be
// in exactly one place: open (and then it runs to an end), ended once, or exactly one letter.
// Shared by tests/poold/poold_crash_points_test.cpp and `sandpool-bench --only journal`.
//
// Not thread-safe; one run at a time per scratch dir. Every poold it starts is killed and
// reaped before run_crash_points() returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sandpool::crash_points {

// The four paths of the crash-point test.
enum class Path {
  kFinish,      // an echo task submitted and completed
  kDeadLetter,  // a flaky task with retries 0: its first attempt asks for a retry, so
                // it is dead-lettered retries_exhausted
  kStopKeep,    // a running sleep task, then `shutdown` with shutdown_timeout 0 and
                // shutdown_unfinished keep: the task stays in the journal
  kReplay,      // a letter (a sleep task dead-lettered by a stop with shutdown_unfinished
                // dead_letter), replayed, the replay run to its end
};

const char* path_name(Path p);

struct Setup {
  std::filesystem::path poold;         // the plain poold
  std::filesystem::path poold_faults;  // poold with the fault VFS
  std::filesystem::path plugin_dir;    // holding libecho.so, libflaky.so, libsleep.so
  std::filesystem::path scratch;       // an empty directory this run may fill
  // At most this many points are killed, spread evenly over 1..K (0: every point).
  std::uint64_t max_points = 0;
};

// What one path came to.
struct PathReport {
  Path path = Path::kFinish;
  std::uint64_t write_points = 0;  // K, counted by the unfaulted run
  std::uint64_t points_run = 0;    // crash@N runs made
  std::uint64_t crashed = 0;       // of those, runs where poold died at its Nth point
  std::uint64_t lost = 0;          // acknowledged tasks found in no place
  std::uint64_t dup = 0;           // tasks found in two places (or with two letters)
  // One line per point that went wrong ("crash@7: task 12 is dead_lettered with no letter"),
  // and any failure of the harness itself (a poold that did not start, ...).
  std::vector<std::string> problems;
};

// Runs `path` as described above. A harness failure is one of `problems`, never thrown.
PathReport run_crash_points(Path path, const Setup& setup);

}  // namespace sandpool::crash_points
