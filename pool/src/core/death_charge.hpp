// Which task a worker's death is charged to: one pure function, decided from the manager's
// own records (docs/security.md: worker-writable memory is never trusted for it).
//
// A worker runs the tasks of its ring one at a time, in the order they were sent, so the
// oldest entry it has not answered yet is the one it is running or about to run: the front.
// The worker's own "started" word is worker-writable and plays no part here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace sandpool::core {

// One entry of a dead worker's ring, oldest first.
struct RingEntry {
  std::uint64_t task_id = 0;
  bool ended = false;  // its attempt already ended (withdrawn after a ring timeout, abandoned)
};

// Returns the index of the ring entry whose attempt the death ends, or nullopt when it ends
// none (the others then go back to the queue without an attempt).
// - Killed for a task (`killed_for` != 0: its timeout, CPU limit, ignored cancel): that
//   task's entry if it is still in the ring and its attempt is open; otherwise none (it
//   answered during the backtrace grace, or it was withdrawn and ended already).
// - Otherwise (a crash, missed heartbeats, a protocol error): the front, if its attempt is
//   open; none when the ring is empty or its front was ended already.
std::optional<std::size_t> charged_entry(std::span<const RingEntry> ring, std::uint64_t killed_for);

}  // namespace sandpool::core
