// Poller: an epoll instance the pool's loop waits on. Owns its epoll fd (closed with it);
// every epoll_ctl goes through posix_call and its failure is returned, naming the call, for
// the caller to act on (WorkerLinks kills a worker it cannot watch or unwatch). Each watched
// fd carries a caller's 64-bit tag, given back with its events. One thread.
#pragma once

#include <sys/epoll.h>

#include <cstdint>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::core {

class Poller {
 public:
  // A new epoll instance (EPOLL_CLOEXEC), or why epoll_create1 failed.
  static Result<Poller> create();

  // Watches fd for input (level-triggered EPOLLIN) under `tag`. Fails when fd is not a valid
  // file epoll can watch, or is watched already.
  Status add(int fd, std::uint64_t tag);
  // Stops watching fd. Fails when fd is not watched (ENOENT) or not open.
  Status remove(int fd);
  // Waits at most timeout_ms (0: not at all; negative: forever) for events, storing at most
  // `max` in `events`. Returns how many; 0 on a timeout or a signal (EINTR: the caller's loop
  // looks again). Not retried on EINTR, so the caller's deadlines stay its own.
  Result<int> wait(epoll_event* events, int max, int timeout_ms);

 private:
  explicit Poller(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace sandpool::core
