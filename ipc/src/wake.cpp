// Futexes, the eventfd and socket-pair doorbells, and the shared monotonic clock.
#include <sandpool/ipc/wake.hpp>

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::ipc {
namespace {

timespec to_timespec(std::int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// A futex word is a plain 32-bit int to the kernel; std::atomic<uint32_t> is guaranteed
// (static_asserts in layout.hpp) to be exactly that, lock-free and standard-layout.
std::uint32_t* futex_addr(std::atomic<std::uint32_t>* word) {
  return reinterpret_cast<std::uint32_t*>(word);
}

}  // namespace

bool futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t timeout_ns) {
  const std::int64_t now = monotonic_ns();
  // A timeout too large to add to the clock is as good as none.
  const std::int64_t deadline =
      timeout_ns < 0 || timeout_ns > INT64_MAX - now ? -1 : now + timeout_ns;
  // FUTEX_WAIT takes a relative timeout, so a retry after EINTR must pass what is left of
  // it, not the original: otherwise a steady stream of signals would stretch the wait
  // without bound.
  Result<long> r = posix_call("futex(FUTEX_WAIT)", [&]() -> long {
    timespec ts{};
    timespec* tsp = nullptr;
    if (deadline >= 0) {
      const std::int64_t left = deadline - monotonic_ns();
      ts = to_timespec(left > 0 ? left : 0);
      tsp = &ts;
    }
    // Not FUTEX_PRIVATE_FLAG: the word is in a MAP_SHARED mapping that the peer process
    // maps at another address; only the shared variant keys the futex on the page itself.
    return ::syscall(SYS_futex, futex_addr(word), FUTEX_WAIT, expected, tsp, nullptr, 0);
  });
  if (r.is_ok()) return true;
  // EAGAIN: the word no longer held `expected` when the kernel looked, as good as a wake.
  // ETIMEDOUT is the plain timeout. EFAULT/EINVAL would be our own bug (a word outside
  // the mapping, or misaligned); reporting "not woken" makes callers re-check their
  // condition and their deadline instead of trusting a wake that never happened.
  return r.status().sys_errno() == EAGAIN;
}

void futex_wake(std::atomic<std::uint32_t>* word, int count) {
  // Cannot fail on a valid, aligned word; a failure here would only mean a missed wake,
  // which every waiter bounds with its timeout.
  (void)posix_call("futex(FUTEX_WAKE)", [&]() -> long {
    return ::syscall(SYS_futex, futex_addr(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
  });
}

Result<EventFd> EventFd::create() {
  Result<int> fd = posix_call("eventfd", [] { return ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); });
  if (!fd) return fd.status();
  return EventFd(UniqueFd(*fd));
}

void EventFd::signal() const {
  const std::uint64_t one = 1;
  // EAGAIN means the counter is at its maximum: the poller sees it readable anyway.
  (void)posix_call("write(eventfd)", [&] { return ::write(fd_.get(), &one, sizeof one); });
}

std::uint64_t EventFd::drain() const {
  std::uint64_t value = 0;
  Result<ssize_t> n =
      posix_call("read(eventfd)", [&] { return ::read(fd_.get(), &value, sizeof value); });
  // EAGAIN: nothing was signalled since the last drain.
  return n.is_ok() && *n == static_cast<ssize_t>(sizeof value) ? value : 0;
}

Result<Doorbell> Doorbell::create() {
  int ends[2];
  // SOCK_NONBLOCK sets O_NONBLOCK on both ends' descriptions; the manager does not rely on
  // it (drain passes MSG_DONTWAIT), the worker's ring() does until the worker clears it.
  Result<int> made = posix_call("socketpair(doorbell)", [&] {
    return ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends);
  });
  if (!made) return made.status();
  return Doorbell(UniqueFd(ends[0]), UniqueFd(ends[1]));
}

bool Doorbell::drain() const {
  // A stream socket hands over every pending byte in one recv, however many writes
  // queued them; only a full buffer can mean more is left.
  char rings[256];
  for (int rounds = 0; rounds < 64; ++rounds) {  // bounded: a worker that rings without
                                                 // pause cannot keep the loop here
    Result<ssize_t> n = posix_call(
        "recv(doorbell)", [&] { return ::recv(fd_.get(), rings, sizeof rings, MSG_DONTWAIT); });
    if (!n) return n.status().sys_errno() == EAGAIN;  // EAGAIN: all drained
    if (*n == 0) return false;                        // end of file: the worker's end is gone
    if (static_cast<std::size_t>(*n) < sizeof rings) return true;
  }
  return true;
}

void DoorbellRinger::ring() const {
  const char bell = 1;
  // EAGAIN: the socket buffer is full of rings the manager has not read yet, which keeps
  // its end readable; any other error means the manager's end is gone.
  (void)posix_call("write(doorbell)", [&] { return ::write(fd_.get(), &bell, 1); });
}

std::int64_t monotonic_ns() {
  timespec ts{};
  // Cannot fail for CLOCK_MONOTONIC with a valid pointer (vDSO, no errno to report).
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace sandpool::ipc
