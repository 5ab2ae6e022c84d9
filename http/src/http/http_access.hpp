// Who may do what over HTTP (docs/protocol.md, "HTTP API", "Rights"). TCP carries no peer
// credentials, so a loopback listener is open to every local user: without a token a
// request gets the socket's read rights with task results withheld and no dead-letter
// contents; the read token adds the contents of every read (results, payloads, dead
// letters); the admin token allows every operation. A token comes in an
// `Authorization: Bearer` header or in the session cookie the login form sets, never in a
// URL. Forms posted with the session cookie carry the session's CSRF token.
//
// Thread-safety: HttpAccess is immutable after load() but for its session table, which
// has its own mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/ops/op_info.hpp>
#include <sandpool/control/rights.hpp>

namespace sandpool::http {

// What a request's credentials grant, lowest first.
enum class Access : std::uint8_t { kAnonymous, kRead, kAdmin };
std::string_view to_string(Access a);

// Whether `access` may run `op`, and with which Rights the handler sees the request.
struct Grant {
  bool allowed = false;
  Rights rights = Rights::kNone;
};
// Anonymous: the operations of read rights (ops::kOps), results withheld. Read: those and
// every other read (Lane::kReads: dlq_list, dlq_show), with contents. Admin: everything.
Grant grant_for(const ops::OpInfo& op, Access access);
// True iff `op` changes nothing (it may be asked with GET): read rights or Lane::kReads.
bool is_read(const ops::OpInfo& op);

// True iff `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(std::string_view host);

// One logged-in browser: what its cookie grants and the token its forms carry.
struct Session {
  Access access = Access::kAnonymous;
  std::string csrf;
  std::chrono::steady_clock::time_point expires;    // 12 h after the login
  std::chrono::steady_clock::time_point last_used;  // idle past session_idle_timeout: ends
};

// Compares in time that depends on the lengths only, not on where the texts differ.
bool same_secret(std::string_view a, std::string_view b);

class HttpAccess {
 public:
  // Reads the token files the config names (each must be a regular file no one but its
  // owner can read or write: mode 0600 or stricter, and hold a token of 16 or more
  // printable characters), and refuses a non-loopback listener without a token.
  static Result<HttpAccess> load(const HttpConfig& config);
  // For tests: the tokens themselves (empty: none).
  static HttpAccess with_tokens(std::string read_token, std::string admin_token);

  HttpAccess(HttpAccess&& o) noexcept;
  HttpAccess& operator=(HttpAccess&&) = delete;

  bool has_admin_token() const { return !admin_token_.empty(); }
  bool has_read_token() const { return !read_token_.empty(); }

  // The access a bearer token grants; nullopt: it is no token of ours.
  std::optional<Access> check_token(std::string_view token) const;

  // A new session for `access` (the login form), its cookie value; the least recently used
  // session of the same right goes when that right has its most (kMaxAdminSessions,
  // kMaxReadSessions), so read logins never push an admin out.
  std::string open_session(Access access) EXCLUDES(mu_);
  // The session a cookie value names, if it is open and neither idle past the idle timeout
  // nor past its lifetime; marks it used.
  std::optional<Session> session(std::string_view id) EXCLUDES(mu_);
  void close_session(std::string_view id) EXCLUDES(mu_);
  void set_session_idle_timeout(std::chrono::milliseconds d) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    idle_timeout_ = d;
  }

  // Seconds until `peer` may try to log in again; nullopt: now. After kLoginFailures
  // failed logins within a minute from one address, it waits for the minute's end.
  std::optional<int> login_throttled(const std::string& peer) EXCLUDES(mu_);
  void login_failed(const std::string& peer) EXCLUDES(mu_);

  static constexpr std::size_t kMaxAdminSessions = 64;
  static constexpr std::size_t kMaxReadSessions = 192;
  static constexpr std::chrono::hours kSessionLifetime{12};
  static constexpr std::size_t kLoginFailures = 10;

 private:
  HttpAccess(std::string read_token, std::string admin_token)
      : read_token_(std::move(read_token)), admin_token_(std::move(admin_token)) {}
  std::string read_token_;
  std::string admin_token_;
  Mutex mu_;
  std::chrono::milliseconds idle_timeout_ GUARDED_BY(mu_){1800000};
  std::map<std::string, Session, std::less<>> sessions_ GUARDED_BY(mu_);
  struct Failures {
    std::chrono::steady_clock::time_point since;  // the minute's start
    std::size_t count = 0;
  };
  std::map<std::string, Failures, std::less<>> failures_ GUARDED_BY(mu_);  // bounded
};

// 32 hex digits from getrandom(2): session ids and CSRF tokens. Throws std::system_error
// when the kernel gives no randomness (never loops on an error).
std::string random_token();

}  // namespace sandpool::http
