// Blocking primitives for the rings' doorbells. Both sides spin first (see the channels);
// these are the syscalls paid only when a side really sleeps.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include <sandpool/status.hpp>
#include <sandpool/unique_fd.hpp>

namespace sandpool::ipc {

// Blocks while *word == expected, for at most timeout_ns (negative: no limit). The futex is
// shared (no FUTEX_PRIVATE_FLAG): the word lives in a MAP_SHARED memfd mapping seen by two
// processes. Returns true iff woken or the value had already changed; false on timeout.
// EINTR is retried with the time left (posix_call), so a signal neither ends the wait early
// nor stretches it. Wakes may be spurious: callers re-check their condition either way.
bool futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t timeout_ns);

// Wakes up to `count` waiters blocked on word.
void futex_wake(std::atomic<std::uint32_t>* word, int count = 1);

// A non-blocking, close-on-exec eventfd: the manager polls it; a worker writes it to ring
// the manager's doorbell. Owns its fd.
class EventFd {
 public:
  static Result<EventFd> create();
  // Adopts an inherited fd (the worker's end).
  static EventFd adopt(int fd) { return EventFd(UniqueFd(fd)); }
  EventFd() = default;

  // Adds one to the counter (wakes a poller). Never blocks; errors are ignored (a full
  // counter still reads as ready).
  void signal() const;
  // Resets the counter; returns its value (0 when nothing was signalled).
  std::uint64_t drain() const;
  int fd() const { return fd_.get(); }

 private:
  explicit EventFd(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// Polls ready() until it returns true (returns true) or until_ns passes (returns false).
// The first rounds pause the CPU between polls; after that each round yields it
// (sched_yield), so on a machine with more spinners than cores a spinner hands its core to
// the thread it is waiting for instead of burning its time slice against it.
template <typename Ready>
bool spin_until(Ready&& ready, std::int64_t until_ns);

// CLOCK_MONOTONIC in nanoseconds / milliseconds (shared by all processes on the machine, so
// the header's heartbeat and deadlines compare across the manager and its workers).
std::int64_t monotonic_ns();
inline std::int64_t monotonic_ms() { return monotonic_ns() / 1000000; }

template <typename Ready>
bool spin_until(Ready&& ready, std::int64_t until_ns) {
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      ::sched_yield();
    }
    if ((i & 7) == 7 && monotonic_ns() >= until_ns) return ready();
  }
}

}  // namespace sandpool::ipc
