// Blocking primitives for the rings' doorbells. Both sides spin first (see the channels);
// these are the syscalls paid only when a side really sleeps.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::ipc {

// Blocks while *word == expected, for at most timeout_ns (negative: no limit). The futex is
// shared (no FUTEX_PRIVATE_FLAG): the word lives in a MAP_SHARED memfd mapping seen by two
// processes. Returns true iff woken or the value had already changed; false on timeout.
// EINTR is retried with the time left (posix_call), so a signal neither ends the wait early
// nor stretches it. Wakes may be spurious: callers re-check their condition either way.
bool futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t timeout_ns);

// Wakes up to `count` waiters blocked on word.
void futex_wake(std::atomic<std::uint32_t>* word, int count = 1);

// A non-blocking, close-on-exec eventfd for wake-ups inside one process (the pool loop's
// inbox). Never share it with a worker: its counter and its O_NONBLOCK flag belong to one
// open file description, so whoever else holds it can take the count or clear the flag
// (Doorbell below is the worker's). Owns its fd.
class EventFd {
 public:
  static Result<EventFd> create();
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

// The manager's doorbell for one worker: a connected pair of Unix stream sockets. The
// manager keeps one end, polls it and drains it with recv(MSG_DONTWAIT); the worker gets
// the other end and rings by writing a byte to it. Unlike a shared eventfd, nothing the
// worker does with its end reaches the manager's: file status flags (O_NONBLOCK) belong to
// the worker's own open file description, bytes the worker writes go to the manager's end
// only (the worker cannot read them back), and MSG_DONTWAIT does not depend on any flag.
// The worker can at most stop ringing (close or shut down its end), which drain() reports.
// Owns both ends until release_worker_end(). Move-only.
class Doorbell {
 public:
  static Result<Doorbell> create();
  Doorbell() = default;

  // The manager's end: poll it for readability.
  int fd() const { return fd_.get(); }
  // The worker's end, to map into the child; -1 once released.
  int worker_fd() const { return worker_fd_.get(); }
  // Closes the manager's copy of the worker's end (after the spawn): from then on only the
  // worker holds it, and its exit or close() shows as end of file here.
  void release_worker_end() { worker_fd_.reset(); }
  // Reads whatever rings are pending, without ever blocking. Returns false iff the
  // worker's end is closed or shut down: it will ring no more and the manager's end stays
  // readable (end of file), so the caller must stop polling it.
  bool drain() const;

 private:
  Doorbell(UniqueFd fd, UniqueFd worker_fd)
      : fd_(std::move(fd)), worker_fd_(std::move(worker_fd)) {}
  UniqueFd fd_;
  UniqueFd worker_fd_;
};

// The worker's side of a Doorbell. ring() is one write(2) of one byte: async-signal-safe,
// allowed by every seccomp profile. Owns its fd.
class DoorbellRinger {
 public:
  // Adopts an inherited end (the worker host's --doorbell-fd).
  static DoorbellRinger adopt(int fd) { return DoorbellRinger(UniqueFd(fd)); }
  DoorbellRinger() = default;

  // Wakes the manager. Never blocks while the end is non-blocking (as the manager creates
  // it); errors are ignored: a full socket buffer is already readable on the manager's side.
  void ring() const;
  int fd() const { return fd_.get(); }

 private:
  explicit DoorbellRinger(UniqueFd fd) : fd_(std::move(fd)) {}
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
