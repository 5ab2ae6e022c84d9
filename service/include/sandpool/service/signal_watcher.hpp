// SignalWatcher: poold's signals (SIGTERM, SIGINT, SIGHUP) as readable events on a
// signalfd, so the main loop waits for a signal and its next timer (the watchdog) in one
// call, and no code runs in signal-handler context.
#pragma once

#include <signal.h>

#include <chrono>
#include <initializer_list>
#include <optional>

#include <sandpool/base/status.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::poold {

// poold's main must create it FIRST, before any thread starts (the pool loops, the control
// server, spdlog's async workers): create() blocks the signals in the calling thread, and
// only threads started afterwards inherit that mask. A thread that still had them unblocked
// would take a SIGTERM with the default action and the process would die without draining.
//
// The signals stay blocked for the life of the process, also after the watcher is destroyed
// (unblocking with one pending would kill the process just as it exits cleanly). The mask is
// inherited across fork and exec: whoever spawns children must reset it in the child.
//
// Ownership: owns the signalfd (close-on-exec, non-blocking). Move-only.
// Thread-safety: one thread waits on it (the main loop); fd() may be handed to an epoll set
// instead.
class SignalWatcher {
 public:
  static constexpr std::initializer_list<int> kServiceSignals = {SIGTERM, SIGINT, SIGHUP};

  // Blocks `signals` in the calling thread and opens a signalfd for them.
  static Result<SignalWatcher> create(std::initializer_list<int> signals = kServiceSignals);

  // Waits up to `timeout` for one of the signals. Returns the signal number (one per call;
  // several pending signals come out on successive calls), std::nullopt when the timeout
  // passed or the wait was interrupted (by a stop/continue, say: the caller recomputes its
  // timeout from its own clock either way), or the failed call. A zero timeout polls.
  Result<std::optional<int>> wait(std::chrono::milliseconds timeout);

  // The signalfd, readable when a signal is pending (for an epoll set); read it with wait(0).
  int fd() const { return fd_.get(); }

 private:
  explicit SignalWatcher(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace sandpool::poold
