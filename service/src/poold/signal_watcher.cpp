#include <sandpool/service/signal_watcher.hpp>

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::poold {

Result<SignalWatcher> SignalWatcher::create(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) {
    if (sigaddset(&set, s) != 0) return Status::invalid("not a signal: " + std::to_string(s));
  }
  SP_RETURN_IF_ERROR(posix_call_rc("pthread_sigmask(SIG_BLOCK)",
                                   [&] { return ::pthread_sigmask(SIG_BLOCK, &set, nullptr); }));
  auto fd =
      posix_call("signalfd", [&] { return ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK); });
  if (!fd) return fd.status();
  return SignalWatcher(UniqueFd(*fd));
}

Result<std::optional<int>> SignalWatcher::wait(std::chrono::milliseconds timeout) {
  struct pollfd p {
    .fd = fd_.get(), .events = POLLIN, .revents = 0
  };
  const auto ms = std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, INT_MAX);
  // No EINTR retry here (unlike posix_call): restarting with the full timeout would stretch
  // the caller's deadline, and the caller loops anyway.
  const int n = ::poll(&p, 1, static_cast<int>(ms));
  if (n < 0) {
    if (errno == EINTR) return std::optional<int>();
    return Status::from_errno(errno, "poll(signalfd)");
  }
  if (n == 0) return std::optional<int>();
  signalfd_siginfo info{};
  auto r = posix_call("read(signalfd)", [&] { return ::read(fd_.get(), &info, sizeof info); });
  if (!r) {
    // Another reader of the same fd (an epoll user) got there first.
    if (r.status().sys_errno() == EAGAIN) return std::optional<int>();
    return r.status();
  }
  if (*r != sizeof info) return Status::error(Code::kInternal, "read(signalfd): short read");
  return std::optional<int>(static_cast<int>(info.ssi_signo));
}

}  // namespace sandpool::poold
