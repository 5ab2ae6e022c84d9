// SystemdNotifier: poold's side of Type=notify (sd_notify(3) from libsystemd): READY,
// RELOADING, STOPPING, STATUS and the watchdog keep-alive. Outside systemd (no
// NOTIFY_SOCKET) every call is a no-op that succeeds and watchdog_interval() is zero.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>

namespace sandpool::poold {

// Reads the environment once, at construction: NOTIFY_SOCKET (is there a service manager to
// tell), WATCHDOG_USEC and WATCHDOG_PID (is the watchdog on, for this process). The
// variables are left in place: sd_notify reads NOTIFY_SOCKET on each call, and the worker
// host clears its environment anyway. Thread-safety: immutable after construction; every
// call may be made from any thread (each sd_notify uses its own socket).
class SystemdNotifier {
 public:
  SystemdNotifier();

  // True iff NOTIFY_SOCKET was set when this object was made.
  bool under_systemd() const { return under_systemd_; }

  // "READY=1" plus "STATUS=<status>": start-up is done (the socket listens, pools run).
  // Also sent after a reload has been applied.
  Status ready(std::string_view status);
  // "RELOADING=1" (and MONOTONIC_USEC): a SIGHUP reload started; ready() ends it.
  Status reloading();
  // "STOPPING=1", plus "STATUS=<status>" when given: shutdown started.
  Status stopping(std::string_view status = {});
  // "STATUS=<text>": free text shown by `systemctl status` (newlines become spaces).
  Status status(std::string_view text);
  // "WATCHDOG=1": the keep-alive. Send at least every watchdog_interval() / 2.
  Status watchdog();

  // WatchdogSec= as systemd passed it (WATCHDOG_USEC, when WATCHDOG_PID is unset or is this
  // process); zero when the watchdog is off or there is no systemd.
  std::chrono::microseconds watchdog_interval() const { return watchdog_interval_; }

 private:
  Status send(const std::string& message);

  bool under_systemd_ = false;
  std::chrono::microseconds watchdog_interval_{0};
};

}  // namespace sandpool::poold
