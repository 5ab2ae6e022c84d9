// The ends of a Redis pool's tasks that a node could not write to Redis before it stopped
// (docs/redis-pools.md, "When Redis goes away"): kept in a file of the node's state dir, one
// JSON object a line, and written to Redis, fenced as any end, when the node starts again.
// Without them a completed task's entry stays pending for the node and runs again.
//
// The file is the node's own, but it is read as hostile: bounded before it is read, and each
// line checked (its pool and node, the entry id, band, task id, states and attempts) before
// it becomes an end; a line that is not one is refused, not guessed at.
//
// Thread-safety: append() and take() hold one lock of the process's; read() holds none.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/task/task.hpp>

#include <sandpool/redis/pool_keys.hpp>

namespace sandpool::redis {

// An end a node holds for Redis: the task's entry and its account, or (release) the entry to
// hand back unrun.
struct UnwrittenEnd {
  StreamEntry entry;
  TaskResult account;
  bool release = false;
  // Set (with release): the local pool refused the task itself, for this reason. The refusal
  // is counted in Redis; the kMaxRefusals-th dead-letters it `rejected`.
  std::string refused{};
};

namespace unwritten_ends {

// Past this, ends are not kept (their entries stay pending: another node runs them again),
// and a file that is larger is not read.
inline constexpr std::uint64_t kMaxFileBytes = 256ULL << 20;
inline constexpr std::size_t kMaxAttempts = 10000;  // per end read back

// <dir>/redis-unwritten-ends-<pool>.jsonl
std::string path_in(const std::string& dir, const std::string& pool);

// Appends `ends` (of node `consumer` in pool `pool`) to the file at `path` (created 0600),
// fsyncs it and its directory. Returns how many were kept: those that would take the file
// past kMaxFileBytes are not.
Result<std::size_t> append(const std::string& path, const std::string& pool,
                           const std::string& consumer, const std::deque<UnwrittenEnd>& ends);

// The ends of the file at `path`, in order (kNotFound: no file). A line that is not an end of
// this pool and node is refused: counted, and the first one's line number and reason kept.
struct ReadBack {
  std::vector<UnwrittenEnd> ends;
  std::size_t refused = 0;
  std::string first_refusal;
};
Result<ReadBack> read(const std::string& path, const std::string& pool,
                      const std::string& consumer);
// read(), then removes the file, as one step against append() from any thread of this
// process: each end appended is in what one take() answers, or in the file after it. A
// caller that cannot write what it took gives the rest back with append(). kNotFound: no
// file; on any other error the file stays.
Result<ReadBack> take(const std::string& path, const std::string& pool,
                      const std::string& consumer);

}  // namespace unwritten_ends
}  // namespace sandpool::redis
