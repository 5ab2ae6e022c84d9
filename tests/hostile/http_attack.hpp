// The hostile-HTTP suite's tools (docs/security.md, "The HTTP listener"): a real poold with
// both tokens and its listener on 127.0.0.1:0, a raw TCP connection for the bytes a real
// client would never send (each read bounded by a deadline, so an attack that hangs poold
// fails the test instead of hanging it), poold's memory from /proc, and the check every
// case ends with: poold is alive, answers /healthz within a second, and grew less than the
// bound the case states.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>

#include "poold/http_test_support.hpp"

namespace sandpool::testing::http_attack {

using namespace http_support;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Every attack's pools: echo to submit to, sleep for tasks that do not end soon.
inline std::string attack_pools() {
  return "pools:\n" + pool_yaml("echo", "echo") + pool_yaml("sleep", "sleep");
}

// A real poold with the read and admin tokens, its listener on 127.0.0.1:0 and `http_extra`
// (", key: value" pairs of service.http) added to its listener's settings.
struct Target {
  explicit Target(const std::string& http_extra = "") {
    write_token(dir.path / "read.token", kReadToken);
    write_token(dir.path / "admin.token", kAdminToken);
    const std::string http =
        "{listen: 127.0.0.1:0, read_token_file: " + (dir.path / "read.token").string() +
        ", admin_token_file: " + (dir.path / "admin.token").string() + http_extra + "}";
    const auto config = dir.path / "poold.yaml";
    write_file(config, http_service_yaml(dir.path, http) + attack_pools());
    poold.emplace(config);
    if (!poold->wait_ready()) FAIL("poold did not start:\n" << poold->output());
    port = http_port(*poold);
  }
  httplib::Client client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(10, 0);
    if (!token.empty()) c.set_bearer_token_auth(token.c_str());
    return c;
  }
  std::string socket() const { return (dir.path / "poold.sock").string(); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
  TempDir dir;
  std::optional<PooldProcess> poold;
  int port = 0;
};

// A field of /proc/<pid>/status in KiB (VmHWM: the peak resident set; VmRSS: the current).
inline long status_kib(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// True iff `pid` is a process that has not exited (a zombie has).
inline bool alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const std::size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// One HTTP response as read off the wire; header names in lower case.
struct Response {
  int status = 0;
  std::multimap<std::string, std::string> headers;
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A TCP connection to the listener from `source` (a loopback address of this host), every
// call bounded by a deadline: connect, send and read never block past it.
class RawHttp {
 public:
  explicit RawHttp(int port, const char* source = "127.0.0.1", milliseconds within = kConnect) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, source, &from.sin_addr) == 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
      connected_ = true;
    } else if (errno == EINPROGRESS && wait_for(POLLOUT, Clock::now() + within)) {
      int err = 0;
      socklen_t len = sizeof err;
      connected_ = ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
  }
  ~RawHttp() { ::close(fd_); }
  RawHttp(const RawHttp&) = delete;
  RawHttp& operator=(const RawHttp&) = delete;

  bool connected() const { return connected_; }

  // Sends all of `bytes`; false when the peer closed or reset the connection, or it took
  // no byte for `within`.
  bool send(std::string_view bytes, milliseconds within = kPatienceMs) {
    const auto deadline = Clock::now() + within;
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN && wait_for(POLLOUT, deadline)) continue;
      return false;
    }
    return true;
  }

  // True iff the server has sent something (or closed) and it waits to be read.
  bool readable(milliseconds within = milliseconds(0)) {
    return !buf_.empty() || wait_for(POLLIN, Clock::now() + within);
  }

  // The response, once its header and (by Content-Length or chunks) its body have come;
  // nullopt when `within` passed or the server closed first.
  std::optional<Response> response(milliseconds within = kPatienceMs) {
    const auto deadline = Clock::now() + within;
    while (true) {
      if (auto r = parse()) return r;
      if (!fill(deadline)) return parse_at_eof();
    }
  }

  // True iff the server closes the connection (EOF or reset) within `within`; what it sent
  // before is kept for response().
  bool closed_within(milliseconds within) {
    const auto deadline = Clock::now() + within;
    while (!eof_) {
      if (!fill(deadline)) return eof_;
    }
    return true;
  }

  int fd() const { return fd_; }

 private:
  static constexpr milliseconds kConnect{5000};
  static constexpr milliseconds kPatienceMs{30000};

  bool wait_for(short events, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, static_cast<int>(std::max<long>(left, 0))) == 1;
  }
  // Reads what came; false at EOF, on an error or past the deadline.
  bool fill(Clock::time_point deadline) {
    if (eof_ || !wait_for(POLLIN, deadline)) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  std::optional<Response> parse_at_eof() {
    if (!eof_) return std::nullopt;
    const std::size_t end = buf_.find("\r\n\r\n");
    if (end == std::string::npos) return std::nullopt;
    Response r = head(end);
    r.body = buf_.substr(end + 4);
    return r;
  }
  Response head(std::size_t end) const {
    Response r;
    std::size_t line_end = buf_.find("\r\n");
    const std::string status_line = buf_.substr(0, line_end);
    const std::size_t sp = status_line.find(' ');
    if (sp != std::string::npos) r.status = std::atoi(status_line.c_str() + sp + 1);
    while (line_end < end) {
      const std::size_t next = buf_.find("\r\n", line_end + 2);
      const std::string line = buf_.substr(line_end + 2, next - line_end - 2);
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        std::size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers.emplace(name, line.substr(v));
      }
      line_end = next;
    }
    return r;
  }
  std::optional<Response> parse() {
    const std::size_t end = buf_.find("\r\n\r\n");
    if (end == std::string::npos) return std::nullopt;
    Response r = head(end);
    const std::size_t body_at = end + 4;
    const std::string length = r.header("content-length");
    if (!length.empty()) {
      const std::size_t n = std::stoul(length);
      if (buf_.size() < body_at + n) return std::nullopt;
      r.body = buf_.substr(body_at, n);
      buf_.erase(0, body_at + n);
      return r;
    }
    if (r.header("transfer-encoding").find("chunked") != std::string::npos) {
      std::size_t at = body_at;
      std::string body;
      while (true) {
        const std::size_t crlf = buf_.find("\r\n", at);
        if (crlf == std::string::npos) return std::nullopt;
        const std::size_t size = std::stoul(buf_.substr(at, crlf - at), nullptr, 16);
        if (buf_.size() < crlf + 2 + size + 2) return std::nullopt;
        body.append(buf_, crlf + 2, size);
        at = crlf + 2 + size + 2;
        if (size == 0) break;
      }
      r.body = std::move(body);
      buf_.erase(0, at);
      return r;
    }
    // No length: a body only an EOF ends (or none, for a status without one).
    if (r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200)) {
      buf_.erase(0, body_at);
      return r;
    }
    return std::nullopt;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

// A request's head: `method path`, Host naming the listener, then `headers` (each line
// ended by \r\n), then the blank line.
inline std::string request_head(const std::string& method, const std::string& path, int port,
                                const std::string& headers = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" +
         headers + "\r\n";
}

inline std::string bearer(const char* token) {
  return "Authorization: Bearer " + std::string(token) + "\r\n";
}

// Sends one whole request on a new connection and reads its response (nullopt: none came
// within `within`).
inline std::optional<Response> round_trip(int port, const std::string& request,
                                          milliseconds within = milliseconds(10000),
                                          const char* source = "127.0.0.1") {
  RawHttp c(port, source);
  if (!c.connected() || !c.send(request, within)) return std::nullopt;
  return c.response(within);
}

// The status /healthz answers on a new connection within `within` (0: no answer in time).
inline int healthz_within(int port, milliseconds within = milliseconds(1000),
                          const char* source = "127.0.0.1") {
  const auto start = Clock::now();
  RawHttp c(port, source, within);
  if (!c.connected()) return 0;
  const auto left = std::chrono::duration_cast<milliseconds>(within - (Clock::now() - start));
  if (left.count() <= 0) return 0;
  if (!c.send(request_head("GET", "/healthz", port, "Connection: close\r\n"), left)) return 0;
  const auto r = c.response(left);
  return r ? r->status : 0;
}

// poold's peak resident set when an attack starts; unharmed() checks after it.
struct Baseline {
  explicit Baseline(const Target& t) : pid(t.poold->pid()), hwm_kib(status_kib(pid, "VmHWM")) {}
  long growth_mib() const { return (status_kib(pid, "VmHWM") - hwm_kib) / 1024; }
  pid_t pid;
  long hwm_kib;
};

// What every attack ends with: poold lives, answers /healthz 200 within a second, and its
// peak resident set grew by less than `bound_mib` since `before`.
inline void check_unharmed(Target& t, const Baseline& before, long bound_mib) {
  INFO("poold's output:\n"
       << t.poold->output().substr(t.poold->output().size() > 4000 ? t.poold->output().size() - 4000
                                                                   : 0));
  REQUIRE(alive(t.poold->pid()));
  CHECK(healthz_within(t.port) == 200);
  const long grown = before.growth_mib();
  INFO("peak RSS grew by " << grown << " MiB");
  CHECK(grown < bound_mib);
}

// A JSON body's field `key`, or "" when the body is not a JSON object holding a string.
inline std::string json_field(const std::string& body, const std::string& key) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return {};
  return j[key].get<std::string>();
}

// A dashboard session opened with `token` through the login form: the cookie to send
// back ("name=value") and the CSRF token its pages carry.
struct Session {
  std::string cookie;
  std::string set_cookie;  // the whole Set-Cookie header
  std::string csrf;
};

inline std::optional<Session> log_in(const Target& t, const char* token) {
  const std::string form = "token=" + std::string(token);
  auto login = round_trip(t.port, request_head("POST", "/login", t.port,
                                               "Content-Type: application/x-www-form-urlencoded\r\n"
                                               "Content-Length: " +
                                                   std::to_string(form.size()) + "\r\n") +
                                      form);
  if (!login || login->status != 303) return std::nullopt;
  Session s;
  s.set_cookie = login->header("set-cookie");
  s.cookie = s.set_cookie.substr(0, s.set_cookie.find(';'));
  auto page = round_trip(t.port, request_head("GET", "/", t.port, "Cookie: " + s.cookie + "\r\n"));
  if (!page) return std::nullopt;
  std::smatch m;
  if (std::regex_search(page->body, m, std::regex(R"(<meta name=csrf content="([0-9a-f]+)\")"))) {
    s.csrf = m[1];
  }
  return s;
}

// A form POST of `fields` to `path` with the session's cookie and `extra` header lines.
inline std::string form_post(const Target& t, const std::string& path, const std::string& fields,
                             const std::string& cookie, const std::string& extra = "") {
  return request_head("POST", path, t.port,
                      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                          std::to_string(fields.size()) + "\r\n" +
                          (cookie.empty() ? "" : "Cookie: " + cookie + "\r\n") + extra) +
         fields;
}

// The JSON POST of `body` to `path` with `extra` header lines.
inline std::string json_post(const Target& t, const std::string& path, const std::string& body,
                             const std::string& extra = "") {
  return request_head("POST", path, t.port,
                      "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n" + extra) +
         body;
}

// The status a small echo task submitted with the admin token gets: 200 while the pool takes
// tasks, 503 once it is drained (0: no answer).
inline int submit_status(const Target& t, const std::string& pool = "echo") {
  auto r =
      t.client(kAdminToken)
          .Post("/api/v1/pools/" + pool + "/tasks",
                nlohmann::json{{"type", pool}, {"payload", "probe"}}.dump(), "application/json");
  return r ? r->status : 0;
}

}  // namespace sandpool::testing::http_attack
