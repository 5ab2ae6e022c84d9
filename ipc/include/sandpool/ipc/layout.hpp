// The shared region's fixed layout: plain data at fixed offsets, no pointers.
// One region per worker: [RegionHeader][task ring bytes][result ring bytes][plugin config].
// Every field below may be scribbled on by a hostile worker; the manager reads each one
// defensively (see ring.hpp and manager/).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace sandpool::ipc {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::uint32_t kRegionMagic = 0x4c4f5053;  // "SPOL" little-endian
inline constexpr std::uint32_t kRegionVersion = 4;         // 4: the plugin config after the rings

// Control words of one single-producer single-consumer byte ring. Positions are
// free-running 64-bit byte counters (never wrap in practice); the slot is pos % capacity.
// Each side's index sits on its own cache line so the two sides do not false-share.
struct RingControl {
  alignas(kCacheLine) std::atomic<std::uint64_t> head;  // bytes published by the producer
  alignas(kCacheLine) std::atomic<std::uint64_t> tail;  // bytes consumed by the consumer
  // Data doorbell: the consumer sets consumer_sleeping before it blocks; a producer that
  // sees it set clears it, bumps data_seq and wakes the consumer (futex on data_seq, or
  // an eventfd for the manager).
  alignas(kCacheLine) std::atomic<std::uint32_t> data_seq;
  std::atomic<std::uint32_t> consumer_sleeping;
  // Space doorbell, the mirror image: a producer out of room sets producer_waiting.
  alignas(kCacheLine) std::atomic<std::uint32_t> space_seq;
  std::atomic<std::uint32_t> producer_waiting;
};

enum class WorkerPhase : std::uint32_t { kStarting = 0, kReady = 1, kStopping = 2 };

// Hung-task diagnostics (diagnostics.hpp): the manager opens a request (a new generation),
// signals each of the worker's threads and says how many it signalled; each thread's
// handler reserves a section of the text with a fetch_add on backtrace_used, fills it and
// counts itself answered. The manager reads at most the array, whatever the words say.
inline constexpr std::size_t kBacktraceBytes = 16384;
inline constexpr std::uint32_t kMaxBacktraceThreads = 64;  // threads the manager signals

// What the worker host's fatal-signal handler (or its task loop) found before the worker
// died: kMemory when the address space was exhausted (RLIMIT_AS).
enum class FatalReport : std::uint32_t { kNone = 0, kMemory = 1 };

struct DiagnosticArea {
  alignas(kCacheLine) std::atomic<std::uint32_t> backtrace_request;  // generation, 0: never asked
  std::atomic<std::uint32_t> backtrace_expected;  // threads signalled; 0 while still signalling
  std::atomic<std::uint32_t> backtrace_answered;  // threads whose section is written
  std::atomic<std::uint32_t> backtrace_used;      // bytes reserved (may pass the array)
  char backtrace[kBacktraceBytes];                // sections, one frame per line, unterminated
  std::atomic<std::uint32_t> fatal_report;        // FatalReport
};

struct RegionHeader {
  // Written by the manager before the worker exists; the worker validates them.
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t region_size;
  std::uint64_t task_ring_offset;
  std::uint64_t task_ring_bytes;  // power of two
  std::uint64_t result_ring_offset;
  std::uint64_t result_ring_bytes;  // power of two
  std::uint64_t max_message;        // largest reassembled message either side accepts
  // The pool's plugin_config (JSON, not NUL-terminated), which the worker reads once before
  // sp_plugin_init: it travels here rather than on the command line or in the environment,
  // which other processes can read (/proc/<pid>/cmdline is world-readable).
  std::uint64_t config_offset;
  std::uint64_t config_bytes;

  // Worker -> manager status words.
  alignas(kCacheLine) std::atomic<std::uint64_t> heartbeat_ms;  // CLOCK_MONOTONIC ms of last beat
  std::atomic<std::uint64_t> started_task;       // id of the task inside handle(), 0 when idle
  std::atomic<std::uint32_t> phase;              // WorkerPhase
  std::atomic<std::uint32_t> violation_syscall;  // SIGSYS report: syscall number + 1, 0 none

  // Manager -> worker control words.
  alignas(kCacheLine) std::atomic<std::uint64_t> cancel_task;  // id asked to stop, 0 none
  std::atomic<std::uint32_t> spin_us;  // how long a dry consumer may spin before sleeping

  RingControl task_ring;    // manager produces, worker consumes
  RingControl result_ring;  // worker produces, manager consumes

  // Cold: written by the worker's signal handlers only (never on the hot path).
  DiagnosticArea diagnostics;
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(std::is_standard_layout_v<RegionHeader>);
static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && sizeof(std::atomic<std::uint32_t>) == 4);

// Rounds n up to the region's data alignment.
constexpr std::uint64_t align_up(std::uint64_t n, std::uint64_t a) {
  return (n + a - 1) & ~(a - 1);
}

}  // namespace sandpool::ipc
