// The one place where errno becomes a Status: posix_call runs a syscall-like function,
// retries it while it fails with EINTR, and returns its value or the errno as a Status that
// names the call.
#pragma once

#include <cerrno>
#include <string_view>
#include <type_traits>

#include <sandpool/base/status.hpp>

namespace sandpool {

// Runs fn() until it does not fail with EINTR. A failure is a return value of -1 (the
// POSIX convention); for functions that return a negative errno instead (pthread style),
// use posix_call_rc. Returns the value, or Status::from_errno(errno, call).
template <typename Fn>
auto posix_call(std::string_view call, Fn&& fn) -> Result<decltype(fn())> {
  using R = decltype(fn());
  static_assert(std::is_integral_v<R> || std::is_pointer_v<R>);
  for (;;) {
    R r = fn();
    if constexpr (std::is_pointer_v<R>) {
      if (r != reinterpret_cast<R>(-1) && r != nullptr) return r;
    } else {
      if (r != static_cast<R>(-1)) return r;
    }
    int err = errno;
    if (err == EINTR) continue;
    return Status::from_errno(err, call);
  }
}

// For calls that return 0 or a positive errno (pthread_*, posix_spawn).
template <typename Fn>
Status posix_call_rc(std::string_view call, Fn&& fn) {
  for (;;) {
    int rc = fn();
    if (rc == 0) return Status::ok();
    if (rc == EINTR) continue;
    return Status::from_errno(rc, call);
  }
}

}  // namespace sandpool
