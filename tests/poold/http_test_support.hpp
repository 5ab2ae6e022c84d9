// A real poold with its HTTP listener for the HTTP API and dashboard tests: token files
// written 0600 in the scratch dir, the port read from the ready line, an httplib client
// with each of the three rights, and a Server-Sent Events reader on a plain socket.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>

#include "poold_process.hpp"

namespace sandpool::testing::http_support {

inline constexpr const char* kReadToken = "read-token-0123456789abcdef";
inline constexpr const char* kAdminToken = "admin-token-0123456789abcdef";

inline void write_token(const std::filesystem::path& p, const std::string& token,
                        mode_t mode = 0600) {
  write_file(p, token + "\n");
  REQUIRE(::chmod(p.c_str(), mode) == 0);
}

// The service section of an HTTP test: no metrics key, the listener on `listen`, the
// token files given (empty: none).
inline std::string http_service_yaml(const std::filesystem::path& dir, const std::string& http) {
  return "service:\n  socket: {path: " + (dir / "poold.sock").string() +
         ", mode: \"0666\"}\n  state_dir: " + (dir / "state").string() +
         "\n  log: {level: debug}\n  http: " + http + "\n";
}

inline int http_port(PooldProcess& poold) {
  REQUIRE(poold.wait_ready());
  std::smatch m;
  const std::string out = poold.output();
  REQUIRE(std::regex_search(out, m, std::regex(R"(poold ready .*http=127\.0\.0\.1:(\d+))")));
  return std::stoi(m[1]);
}

// A scratch dir with both token files and a poold serving `pools` (YAML from "pools:").
struct HttpFixture {
  // `admin_token`: an admin token too; `read_token`: a read token (without either, a
  // loopback listener serves anonymous reads, with results withheld).
  explicit HttpFixture(const std::string& pools, bool admin_token = true, bool read_token = true,
                       const std::string& more_http = "") {
    if (read_token) write_token(dir.path / "read.token", kReadToken);
    if (admin_token) write_token(dir.path / "admin.token", kAdminToken);
    std::string http = "{listen: 127.0.0.1:0";
    if (read_token) http += ", read_token_file: " + (dir.path / "read.token").string();
    if (admin_token) http += ", admin_token_file: " + (dir.path / "admin.token").string();
    if (!more_http.empty()) http += ", " + more_http;
    http += "}";
    config = dir.path / "poold.yaml";
    write_file(config, http_service_yaml(dir.path, http) + pools);
    poold.emplace(config);
    if (!poold->wait_ready()) FAIL("poold did not start:\n" << poold->output());
    port = http_port(*poold);
  }
  // A client sending `token` as a bearer token (empty: none).
  httplib::Client client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    if (!token.empty()) c.set_bearer_token_auth(token.c_str());
    return c;
  }
  // Runs poolctl on this poold's socket; its stdout.
  std::string poolctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--socket", (dir.path / "poold.sock").string()});
    const auto r = run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl", args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  }
  TempDir dir;
  std::filesystem::path config;
  std::optional<PooldProcess> poold;
  int port = 0;
};

// The Authorization header line of each token, for raw requests (SseReader).
inline std::string read_header() {
  return std::string("Authorization: Bearer ") + kReadToken + "\r\n";
}
inline std::string admin_header() {
  return std::string("Authorization: Bearer ") + kAdminToken + "\r\n";
}

inline nlohmann::json body_of(const httplib::Result& r) {
  REQUIRE(r);
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  INFO(r->body);
  REQUIRE(j.is_object());
  return j;
}

// One Server-Sent Events stream read from a plain socket (httplib's client would block a
// thread on it): the request, its status line, then one `data:` line at a time.
class SseReader {
 public:
  SseReader(int port, const std::string& path, const std::string& extra_headers = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers +
                            "Connection: close\r\n\r\n";
    REQUIRE(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  }
  ~SseReader() { ::close(fd_); }
  SseReader(const SseReader&) = delete;
  SseReader& operator=(const SseReader&) = delete;

  // The status code of the response (reads its header).
  int status() {
    while (buf_.find("\r\n\r\n") == std::string::npos) {
      if (!fill()) return -1;
    }
    const std::size_t sp = buf_.find(' ');
    return std::stoi(buf_.substr(sp + 1, 3));
  }
  // The next event's data as JSON; nullopt when the stream ended or kPatience passed.
  std::optional<nlohmann::json> next() {
    while (true) {
      const std::size_t at = buf_.find("data: ", scanned_);
      if (at != std::string::npos) {
        const std::size_t end = buf_.find('\n', at);
        if (end != std::string::npos) {
          scanned_ = end;
          auto j = nlohmann::json::parse(buf_.substr(at + 6, end - at - 6), nullptr, false);
          if (j.is_object()) return j;
          continue;
        }
      }
      if (!fill()) return std::nullopt;
    }
  }

 private:
  bool fill() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kPatience.count() * 1000)) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
  std::size_t scanned_ = 0;
};

}  // namespace sandpool::testing::http_support
