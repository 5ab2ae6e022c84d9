#include "core/poller.hpp"

#include <cerrno>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::core {

Result<Poller> Poller::create() {
  auto fd = posix_call("epoll_create1", [] { return ::epoll_create1(EPOLL_CLOEXEC); });
  if (!fd) return fd.status();
  return Poller(UniqueFd(*fd));
}

Status Poller::add(int fd, std::uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  return posix_call("epoll_ctl(EPOLL_CTL_ADD)",
                    [&] { return ::epoll_ctl(fd_.get(), EPOLL_CTL_ADD, fd, &ev); })
      .status();
}

Status Poller::remove(int fd) {
  return posix_call("epoll_ctl(EPOLL_CTL_DEL)",
                    [&] { return ::epoll_ctl(fd_.get(), EPOLL_CTL_DEL, fd, nullptr); })
      .status();
}

Result<int> Poller::wait(epoll_event* events, int max, int timeout_ms) {
  const int n = ::epoll_wait(fd_.get(), events, max, timeout_ms);
  if (n >= 0) return n;
  if (errno == EINTR) return 0;
  return Status::from_errno(errno, "epoll_wait");
}

}  // namespace sandpool::core
