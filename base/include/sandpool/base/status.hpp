// The one error type of sandpool: a code, the errno that caused it (0 when none) and a
// message naming what failed. Status is a value; Result<T> carries a T or a Status.
// Thread-safety: plain values, safe to copy across threads.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sandpool {

enum class Code {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed (bad config, bad usage)
  kNotFound,          // a named thing does not exist (file, task, symbol)
  kSystem,            // a syscall failed; errno() says why
  kProtocol,          // a peer broke the wire protocol (hostile or buggy worker)
  kQueueFull,         // a bounded queue refused the item
  kClosed,            // the object is shutting down or closed
  kTimeout,           // a bounded wait ran out
  kTooLarge,          // a payload/result/frame over its configured maximum
  kPlugin,            // a plugin could not be loaded or refused to init
  kCancelled,         // the operation was cancelled
  kInternal,          // a broken invariant of our own
  kUnavailable,       // the service cannot be reached (no socket, refused, connection lost)
  kPermissionDenied,  // the peer lacks the rights for the operation
};

// Returns the stable lower-case name of a code ("queue_full", "too_large", ...).
std::string_view code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status error(Code code, std::string message) {
    return Status(code, 0, std::move(message));
  }
  // A failed syscall: `call` names it ("mmap", "prctl(PR_SET_PDEATHSIG)"), err is its errno.
  static Status from_errno(int err, std::string_view call) {
    std::string msg(call);
    msg += ": ";
    msg += std::strerror(err);
    return Status(Code::kSystem, err, std::move(msg));
  }
  static Status invalid(std::string message) {
    return error(Code::kInvalidArgument, std::move(message));
  }
  static Status protocol(std::string message) { return error(Code::kProtocol, std::move(message)); }
  static Status too_large(std::string message) {
    return error(Code::kTooLarge, std::move(message));
  }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  int sys_errno() const { return errno_; }
  const std::string& message() const { return message_; }
  // "code_name: message", or "ok".
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context` and ": " (ok stays ok).
  Status with_context(std::string_view context) const {
    if (is_ok()) return *this;
    Status s = *this;
    s.message_ = std::string(context) + ": " + message_;
    return s;
  }

 private:
  Status(Code code, int err, std::string message)
      : code_(code), errno_(err), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  int errno_ = 0;
  std::string message_;
};

// Holds a T or a non-ok Status. Constructing from an ok Status is a programming error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  // The error; Status::ok() when a value is held.
  Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

inline std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kSystem:
      return "system";
    case Code::kProtocol:
      return "protocol_error";
    case Code::kQueueFull:
      return "queue_full";
    case Code::kClosed:
      return "closed";
    case Code::kTimeout:
      return "timeout";
    case Code::kTooLarge:
      return "too_large";
    case Code::kPlugin:
      return "plugin";
    case Code::kCancelled:
      return "cancelled";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kPermissionDenied:
      return "permission_denied";
  }
  return "unknown";
}

inline std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string s(code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

}  // namespace sandpool

// Propagates a non-ok Status from an expression returning Status.
#define SP_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::sandpool::Status sp_status_ = (expr);     \
    if (!sp_status_.is_ok()) return sp_status_; \
  } while (0)
