#include "http/http_access.hpp"

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/secret_file.hpp>

namespace sandpool::http {
namespace {

constexpr std::size_t kMinTokenLength = 16;

Result<std::string> read_token_file(const std::string& path, std::string_view key) {
  const std::string what = "service.http." + std::string(key) + " " + path;
  auto read = read_secret_file(path, what);
  if (!read) return read.status();
  std::string token = std::move(read).value();
  const bool printable =
      std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (token.size() < kMinTokenLength || !printable) {
    return Status::invalid(what + ": expected one token of at least " +
                           std::to_string(kMinTokenLength) +
                           " printable characters without spaces (e.g. openssl rand -hex 16)");
  }
  return token;
}

}  // namespace

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // volatile: no early exit the compiler might invent
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  }
  return diff == 0;
}

std::string_view to_string(Access a) {
  switch (a) {
    case Access::kAnonymous:
      return "anonymous";
    case Access::kRead:
      return "read";
    case Access::kAdmin:
      return "admin";
  }
  return "anonymous";
}

bool is_read(const ops::OpInfo& op) {
  return op.rights == Rights::kRead || op.lane == ops::Lane::kReads;
}

Grant grant_for(const ops::OpInfo& op, Access access) {
  switch (access) {
    case Access::kAnonymous:
      return {op.rights == Rights::kRead, Rights::kRead};
    case Access::kRead:
      return {is_read(op), Rights::kAdmin};
    case Access::kAdmin:
      return {true, Rights::kAdmin};
  }
  return {};
}

bool is_loopback(std::string_view host) {
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Result<HttpAccess> HttpAccess::load(const HttpConfig& config) {
  std::string read_token, admin_token;
  if (!config.read_token_file.empty()) {
    auto t = read_token_file(config.read_token_file, "read_token_file");
    if (!t) return t.status();
    read_token = std::move(*t);
  }
  if (!config.admin_token_file.empty()) {
    auto t = read_token_file(config.admin_token_file, "admin_token_file");
    if (!t) return t.status();
    admin_token = std::move(*t);
  }
  if (!read_token.empty() && read_token == admin_token) {
    return Status::invalid(
        "service.http: the read and admin token files hold the same token; give each its own");
  }
  if (!is_loopback(config.host) && read_token.empty() && admin_token.empty()) {
    return Status::invalid("service.http.listen " + config.host + ":" +
                           std::to_string(config.port) +
                           " is not a loopback address and no token is configured: anyone "
                           "who reaches it could read the pools; set "
                           "service.http.read_token_file and/or admin_token_file, or listen on "
                           "127.0.0.1");
  }
  return HttpAccess(std::move(read_token), std::move(admin_token));
}

HttpAccess HttpAccess::with_tokens(std::string read_token, std::string admin_token) {
  return HttpAccess(std::move(read_token), std::move(admin_token));
}

HttpAccess::HttpAccess(HttpAccess&& o) noexcept
    : read_token_(std::move(o.read_token_)), admin_token_(std::move(o.admin_token_)) {
  MutexLock lock(o.mu_);
  idle_timeout_ = o.idle_timeout_;
  sessions_ = std::move(o.sessions_);
  failures_ = std::move(o.failures_);
}

std::optional<Access> HttpAccess::check_token(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  if (!admin_token_.empty() && same_secret(token, admin_token_)) return Access::kAdmin;
  if (!read_token_.empty() && same_secret(token, read_token_)) return Access::kRead;
  return std::nullopt;
}

std::string HttpAccess::open_session(Access access) {
  const auto now = std::chrono::steady_clock::now();
  std::string id = random_token();
  std::string csrf = random_token();
  MutexLock lock(mu_);
  const auto idle = idle_timeout_;
  std::erase_if(sessions_, [&](const auto& kv) {
    return kv.second.expires <= now || kv.second.last_used + idle <= now;
  });
  const std::size_t cap = access == Access::kAdmin ? kMaxAdminSessions : kMaxReadSessions;
  while (true) {
    auto oldest = sessions_.end();
    std::size_t same = 0;
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.access != access) continue;
      ++same;
      if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) {
        oldest = it;
      }
    }
    if (same < cap) break;
    sessions_.erase(oldest);
  }
  sessions_[id] = Session{access, std::move(csrf), now + kSessionLifetime, now};
  return id;
}

std::optional<Session> HttpAccess::session(std::string_view id) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= now || it->second.last_used + idle_timeout_ <= now) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_used = now;
  return it->second;
}

void HttpAccess::close_session(std::string_view id) {
  MutexLock lock(mu_);
  if (auto it = sessions_.find(id); it != sessions_.end()) sessions_.erase(it);
}

std::optional<int> HttpAccess::login_throttled(const std::string& peer) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  const auto it = failures_.find(peer);
  if (it == failures_.end()) return std::nullopt;
  const auto end = it->second.since + std::chrono::minutes(1);
  if (end <= now) {
    failures_.erase(it);
    return std::nullopt;
  }
  if (it->second.count < kLoginFailures) return std::nullopt;
  return static_cast<int>(std::chrono::ceil<std::chrono::seconds>(end - now).count());
}

void HttpAccess::login_failed(const std::string& peer) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  // Bounded: past 4096 addresses, the ones whose minute is over go, then the oldest.
  if (failures_.size() >= 4096 && failures_.find(peer) == failures_.end()) {
    std::erase_if(failures_,
                  [&](const auto& kv) { return kv.second.since + std::chrono::minutes(1) <= now; });
    while (failures_.size() >= 4096) {
      failures_.erase(std::min_element(failures_.begin(), failures_.end(), [](auto& a, auto& b) {
        return a.second.since < b.second.since;
      }));
    }
  }
  Failures& f = failures_[peer];
  if (f.count == 0 || f.since + std::chrono::minutes(1) <= now) f = Failures{now, 0};
  ++f.count;
}

std::string random_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace sandpool::http
