#include <sandpool/service/systemd_notifier.hpp>

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace sandpool::poold {
namespace {

// One assignment per line is the protocol, so a status text must stay on one line.
std::string one_line(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  under_systemd_ = socket != nullptr && *socket != '\0';
  std::uint64_t usec = 0;
  // > 0: on and meant for this pid; 0: off, or WATCHDOG_PID names another process; < 0:
  // the variables are malformed, which we treat as off.
  if (under_systemd_ && ::sd_watchdog_enabled(0, &usec) > 0) {
    watchdog_interval_ = std::chrono::microseconds(usec);
  }
}

Status SystemdNotifier::ready(std::string_view status) {
  return send("READY=1\nSTATUS=" + one_line(status));
}

Status SystemdNotifier::reloading() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const auto usec = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000u +
                    static_cast<std::uint64_t>(ts.tv_nsec) / 1'000u;
  return send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

Status SystemdNotifier::stopping(std::string_view status) {
  if (status.empty()) return send("STOPPING=1");
  return send("STOPPING=1\nSTATUS=" + one_line(status));
}

Status SystemdNotifier::status(std::string_view text) { return send("STATUS=" + one_line(text)); }

Status SystemdNotifier::watchdog() { return send("WATCHDOG=1"); }

Status SystemdNotifier::send(const std::string& message) {
  if (!under_systemd_) return Status::ok();
  // sd_notify returns > 0 when sent, 0 when NOTIFY_SOCKET is unset (meanwhile), or -errno.
  const int rc = ::sd_notify(0, message.c_str());
  if (rc < 0) return Status::from_errno(-rc, "sd_notify");
  return Status::ok();
}

}  // namespace sandpool::poold
