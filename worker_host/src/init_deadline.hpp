// InitDeadline: the worker's own backstop for a plugin that hangs in its constructors or
// in sp_plugin_init. While armed, a real-time timer (setitimer, ms precision) raises
// SIGALRM after the timeout; the handler writes one line to stderr and _exit(kExitInit).
// The manager enforces init_timeout too; this only makes the worker give up by itself.
//
// One per process, on the main thread; disarm() (or destruction) restores SIGALRM.
#pragma once

#include <cstdint>

#include <sandpool/base/status.hpp>

namespace sandpool::worker {

class InitDeadline {
 public:
  InitDeadline() = default;
  InitDeadline(const InitDeadline&) = delete;
  InitDeadline& operator=(const InitDeadline&) = delete;
  ~InitDeadline() { disarm(); }

  // Installs the handler and starts the timer.
  Status arm(std::uint32_t timeout_ms);
  // Stops the timer and restores SIGALRM's default disposition.
  void disarm();

 private:
  bool armed_ = false;
};

}  // namespace sandpool::worker
