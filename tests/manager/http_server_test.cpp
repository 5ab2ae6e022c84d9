// The HTTP server poold's listener runs on (metrics/include/sandpool/metrics/http_server.hpp),
// in-process with real sockets: its pure parts (percent-decoding, UTF-8, targets), then what it
// bounds before a handler runs, and that nothing a handler throws ends it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <sandpool/metrics/http_parts.hpp>
#include <sandpool/metrics/http_server.hpp>

namespace sandpool {
namespace {

using namespace std::chrono_literals;

TEST_CASE("http parts: percent-decoding takes only well-formed escapes") {
  CHECK(percent_decode("a%20b", false) == "a b");
  CHECK(percent_decode("a+b", true) == "a b");
  CHECK(percent_decode("a+b", false) == "a+b");
  CHECK(percent_decode("%FF", false) == std::string("\xff"));
  CHECK_FALSE(percent_decode("%", false));
  CHECK_FALSE(percent_decode("%4", false));
  CHECK_FALSE(percent_decode("%zz", false));
}

TEST_CASE("http parts: UTF-8 is checked strictly") {
  CHECK(valid_utf8("plain"));
  CHECK(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(valid_utf8("\xff"));
  CHECK_FALSE(valid_utf8("\xc3"));              // cut short
  CHECK_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST_CASE("http parts: a target's path and query are decoded, and bad text is named") {
  HttpRequest r;
  REQUIRE(http_parts::split_target("/pools/e%63ho?pool=a+b&x=%C3%A9", &r));
  CHECK(r.path == "/pools/echo");
  CHECK(r.param("pool") == "a b");
  CHECK(r.param("x") == "\xc3\xa9");
  HttpRequest bad;
  const Status st = http_parts::split_target("/api/v1/stats?pool=%FF", &bad);
  CHECK_FALSE(st);
  CHECK(st.message().find("'pool'") != std::string::npos);
  CHECK_FALSE(http_parts::split_target("/pools/%FF", &bad));
  CHECK_FALSE(http_parts::split_target("/a%00b", &bad));
  CHECK_FALSE(http_parts::split_target("http://evil/", &bad));
}

TEST_CASE("http parts: an error answer is JSON even when its message is not UTF-8") {
  HttpResponse res;
  http_parts::error_answer(res, 400, "bad \xff byte");
  CHECK(res.status == 400);
  CHECK(res.body.find("bad_request") != std::string::npos);
  CHECK(valid_utf8(res.body));
}

// A raw HTTP exchange over a fresh connection: what the server answers to `request`.
std::string exchange(std::uint16_t port, const std::string& request,
                     std::chrono::milliseconds patience = 10s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got;
  const auto until = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
    if (got.find("\r\n\r\n") != std::string::npos &&
        got.find("Connection: close") == std::string::npos &&
        got.find("Content-Length: ") != std::string::npos) {
      const std::size_t head = got.find("\r\n\r\n") + 4;
      const std::size_t cl = got.find("Content-Length: ");
      if (got.size() >= head + std::stoul(got.substr(cl + 16))) break;
    }
  }
  ::close(fd);
  return got;
}

int status_of(const std::string& response) {
  if (response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

struct ServerFixture {
  explicit ServerFixture(HttpLimits limits = {}) {
    auto s = HttpServer::bind("127.0.0.1:0", limits, "test");
    REQUIRE(s);
    server = std::move(*s);
    server->get("/hello", HttpServer::Lane::kApi,
                [](const HttpRequest&, HttpResponse& res) { res.set_content("hi", "text/plain"); });
    server->get("/throw", HttpServer::Lane::kApi, [](const HttpRequest&, HttpResponse&) {
      throw std::runtime_error("a handler's bug");
    });
    server->get("/block", HttpServer::Lane::kApi, [this](const HttpRequest&, HttpResponse&) {
      std::unique_lock lock(mu);
      ++blocked;
      cv.notify_all();
      cv.wait(lock, [this] { return released; });
    });
    server->add({"POST",
                 std::regex("/upload"),
                 HttpServer::Lane::kApi,
                 false,
                 {},
                 [](const HttpRequest& req, HttpResponse& res) {
                   res.set_content(std::to_string(req.body.size()), "text/plain");
                 }});
    server->get("/healthz", HttpServer::Lane::kProbe,
                [](const HttpRequest&, HttpResponse& res) { res.set_content("ok", "text/plain"); });
    server->start("sp-test-http");
  }
  ~ServerFixture() {
    release();
    server->stop();
  }
  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  std::string get(const std::string& path) {
    return exchange(server->port(), "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  }
  std::unique_ptr<HttpServer> server;
  std::mutex mu;
  std::condition_variable cv;
  int blocked = 0;
  bool released = false;
};

TEST_CASE("http server: a handler that throws answers 500 and the server goes on") {
  ServerFixture f;
  CHECK(status_of(f.get("/throw")) == 500);
  CHECK(status_of(f.get("/hello")) == 200);
  CHECK(status_of(f.get("/nowhere")) == 404);
}

TEST_CASE("http server: headers and bodies are bounded before a handler runs") {
  HttpLimits l;
  l.max_header_bytes = 2048;
  l.max_headers = 10;
  l.small_body = 1000;
  ServerFixture f(l);
  const std::string big(4000, 'a');
  CHECK(status_of(exchange(f.server->port(),
                           "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n")) == 431);
  std::string many = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 20; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  CHECK(status_of(exchange(f.server->port(), many + "\r\n")) == 431);
  CHECK(status_of(exchange(f.server->port(),
                           "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")) ==
        413);
  // A chunked body is counted as it comes: cut at the bound.
  std::string chunked = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) chunked += "1f4\r\n" + std::string(500, 'z') + "\r\n";
  CHECK(status_of(exchange(f.server->port(), chunked)) == 413);
  CHECK(status_of(exchange(f.server->port(),
                           "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Encoding: "
                           "gzip\r\nContent-Length: 2\r\n\r\nab")) == 415);
  const std::string ok = exchange(
      f.server->port(), "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  CHECK(status_of(ok) == 200);
  CHECK(ok.substr(ok.size() - 1) == "3");
}

TEST_CASE("http server: a full lane answers 503 at once, the probe lane still answers") {
  HttpLimits l;
  l.serving_threads = 1;
  l.queued_requests = 0;
  ServerFixture f(l);
  std::thread holder([&] { (void)f.get("/block"); });
  {
    std::unique_lock lock(f.mu);
    REQUIRE(f.cv.wait_for(lock, 30s, [&] { return f.blocked == 1; }));
  }
  CHECK(status_of(f.get("/hello")) == 503);
  CHECK(status_of(f.get("/healthz")) == 200);
  f.release();
  holder.join();
  CHECK(status_of(f.get("/hello")) == 200);
}

TEST_CASE("http server: at its connection cap the longest-waiting idle connection makes room") {
  HttpLimits l;
  l.max_connections = 8;
  l.max_connections_per_client = 8;
  ServerFixture f(l);
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(f.server->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    (void)::send(fd, "GET /hel", 8, MSG_NOSIGNAL);  // a header that never ends
    idle.push_back(fd);
  }
  CHECK(status_of(f.get("/healthz")) == 200);
  CHECK(f.server->open_connections() <= 8);
  for (int fd : idle) ::close(fd);
}

TEST_CASE("http server: a header that does not arrive in time closes the connection") {
  HttpLimits l;
  l.header_timeout = 200ms;
  ServerFixture f(l);
  const auto start = std::chrono::steady_clock::now();
  const std::string got = exchange(f.server->port(), "GET /hello HTTP/1.1\r\nHost: x\r\n", 30s);
  CHECK(got.empty());
  CHECK(std::chrono::steady_clock::now() - start < 20s);
}

}  // namespace
}  // namespace sandpool
