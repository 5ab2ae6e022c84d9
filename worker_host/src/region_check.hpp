// The worker's check of its own shared region after each handler (issue 40): a handler runs
// in the worker's address space and can write anywhere in the region, including the words
// only the worker writes. Finding them broken before it answers or reads another task, the
// worker leaves with kExitRegionCorrupt, so the attempt charged is the one whose handler
// did it, and the next task goes to a fresh worker with a fresh region.
//
// What is checked (each a value the worker knows without trusting the region):
// - the geometry the manager wrote before the worker existed (magic, version, sizes,
//   offsets), against the copy taken when the region was attached: the canary at the
//   region's head;
// - the words only the worker writes: its published ring positions (the task ring's tail,
//   the result ring's head), its sleep/wait flags (0 outside the loop's own waits),
//   started_task (the running task's id), phase, the SIGSYS and fatal-report words (0 while
//   the worker lives), heartbeat_ms (never ahead of the clock);
// then the task loop decodes the manager's frames that arrived meanwhile, which bounds the
// task ring's head too, before the answer goes out.
// Not checked here: the result ring's tail (the manager's word, on a line it writes at every
// read: loading it costs a cache miss per task; the sender bounds it when it needs room),
// ring bytes (validated where they are read), the plugin config (read once, before init),
// the diagnostics area (the manager's to bound).
//
// Pure over a RegionHeader, so it is tested on a local buffer (region_check_test.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <sandpool/ipc/layout.hpp>

namespace sandpool::worker {

// The header's fixed words as the manager wrote them, copied when the region is attached.
struct RegionGeometry {
  std::uint32_t magic = 0;
  std::uint32_t version = 0;
  std::uint64_t region_size = 0;
  std::uint64_t task_ring_offset = 0;
  std::uint64_t task_ring_bytes = 0;
  std::uint64_t result_ring_offset = 0;
  std::uint64_t result_ring_bytes = 0;
  std::uint64_t max_message = 0;
  std::uint64_t config_offset = 0;
  std::uint64_t config_bytes = 0;
};

// Returns the header's geometry words.
RegionGeometry geometry_of(const ipc::RegionHeader& header);

// What the worker's private state says its own words hold now.
struct OwnWords {
  std::uint64_t running_task = 0;  // started_task
  ipc::WorkerPhase phase = ipc::WorkerPhase::kReady;
  std::uint64_t task_tail = 0;    // the task ring's tail as last published
  std::uint64_t result_head = 0;  // the result ring's head as last published
  // CLOCK_MONOTONIC_COARSE in ms (beat's clock). Read after the heartbeat word is: a plugin
  // thread may beat during the check, and a clock read before the word would be behind it.
  std::uint64_t (*now_ms)() = nullptr;
};

// Returns an empty string iff the header is as the worker left it; otherwise what is broken
// first ("started_task is 18446744073709551615, not 7").
std::string find_region_damage(const ipc::RegionHeader& header, const RegionGeometry& geometry,
                               const OwnWords& own);

}  // namespace sandpool::worker
