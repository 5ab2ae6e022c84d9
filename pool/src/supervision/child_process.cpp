#include <signal.h>
#include <sys/wait.h>
#include <sandpool/base/pidfd.hpp>

#include <cstring>
#include <string>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/pool/spawner.hpp>

namespace sandpool {
namespace {

std::optional<ExitStatus> wait_pidfd(int pidfd, int flags) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  auto r = posix_call("waitid(P_PIDFD)", [&] {
    return ::waitid(static_cast<idtype_t>(P_PIDFD), pidfd, &info, WEXITED | flags);
  });
  if (!r || info.si_pid == 0) return std::nullopt;
  ExitStatus s;
  if (info.si_code == CLD_EXITED) {
    s.exited = true;
    s.code = info.si_status;
  } else {
    s.signal = info.si_status;
  }
  return s;
}

}  // namespace

std::string describe(const ExitStatus& s) {
  if (s.exited) return "exited with code " + std::to_string(s.code);
  const char* abbrev = sigabbrev_np(s.signal);
  return std::string("killed by ") +
         (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(s.signal));
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)), status_(o.status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    if (pidfd_ && !status_) {
      signal(SIGKILL);
      wait();
    }
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::move(o.pidfd_);
    status_ = o.status_;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pidfd_ && !status_) {
    signal(SIGKILL);
    wait();
  }
}

bool ChildProcess::signal(int sig) const {
  if (!pidfd_ || status_) return false;
  return sandpool::pidfd_send_signal(pidfd_.get(), sig) == 0;
}

std::optional<ExitStatus> ChildProcess::try_reap() {
  if (status_) return status_;
  if (!pidfd_) return std::nullopt;
  status_ = wait_pidfd(pidfd_.get(), WNOHANG);
  return status_;
}

ExitStatus ChildProcess::wait() {
  if (status_) return *status_;
  if (pidfd_) status_ = wait_pidfd(pidfd_.get(), 0);
  if (!status_) status_ = ExitStatus{true, 0, 0};  // not ours to reap (already reaped elsewhere)
  return *status_;
}

}  // namespace sandpool
