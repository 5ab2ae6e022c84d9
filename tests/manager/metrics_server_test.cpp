// MetricsServer on a real socket: a port picked by the kernel, GET /metrics and /healthz with
// httplib's client, bad addresses refused, a taken port reported, a clean stop.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include <httplib.h>
#include <sandpool/metrics/metrics.hpp>

using namespace sandpool;

namespace {

// What the callbacks serve; set by the test thread, read by the server's threads.
struct Source {
  std::mutex mu;
  std::string text = "sandpool_queue_depth{pool=\"a\"} 3\n";
  std::optional<std::string> problem;
  std::atomic<int> scrapes{0};

  MetricsServer::TextSource metrics() {
    return [this] {
      scrapes.fetch_add(1);
      std::lock_guard lock(mu);
      return text;
    };
  }
  MetricsServer::HealthCheck health() {
    return [this] {
      std::lock_guard lock(mu);
      return problem;
    };
  }
};

std::unique_ptr<MetricsServer> start(Source& src, std::string_view listen = "127.0.0.1:0") {
  auto server = MetricsServer::start(listen, src.metrics(), src.health());
  REQUIRE(server.is_ok());
  return std::move(server).value();
}

}  // namespace

TEST_CASE("the metrics server on port 0 serves /metrics and /healthz on the port it picked") {
  Source src;
  auto server = start(src);
  REQUIRE(server->port() != 0);
  CHECK(server->address() == "127.0.0.1:" + std::to_string(server->port()));

  httplib::Client client("127.0.0.1", server->port());
  auto res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body == "sandpool_queue_depth{pool=\"a\"} 3\n");
  CHECK(res->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(src.scrapes.load() == 1);

  auto health = client.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");

  {
    std::lock_guard lock(src.mu);
    src.problem = "pool 'images' failed: plugin init failed 3 times";
    src.text = "sandpool_queue_depth{pool=\"a\"} 4\n";
  }
  health = client.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 503);
  CHECK(health->body == "pool 'images' failed: plugin init failed 3 times\n");
  res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->body == "sandpool_queue_depth{pool=\"a\"} 4\n");

  auto missing = client.Get("/nothing");
  REQUIRE(missing);
  CHECK(missing->status == 404);
}

TEST_CASE("a stopped metrics server no longer answers") {
  Source src;
  auto server = start(src);
  const int port = server->port();
  server->stop();
  server->stop();  // idempotent
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  CHECK_FALSE(client.Get("/metrics"));
  CHECK(src.scrapes.load() == 0);
}

TEST_CASE("a metrics server stopped at once after starting stops cleanly") {
  // stop() may come before the serving thread has begun to listen. Either way it returns with
  // the listening socket closed: nothing answers on the port, and a new server takes the
  // same port at once (a socket still listening there would make that bind fail).
  Source src;
  for (int i = 0; i < 20; ++i) {
    auto server = start(src);
    const int port = server->port();
    server->stop();
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(2);
    CHECK_FALSE(client.Get("/metrics"));
    auto again =
        MetricsServer::start("127.0.0.1:" + std::to_string(port), src.metrics(), src.health());
    INFO("port " << port << ": " << again.status().to_string());
    REQUIRE(again.is_ok());
    (*again)->stop();
  }
  CHECK(src.scrapes.load() == 0);
}

TEST_CASE("a callback that throws becomes a 500 for /metrics and a 503 for /healthz") {
  auto server = MetricsServer::start(
      "127.0.0.1:0", []() -> std::string { throw std::runtime_error("store closed"); },
      []() -> std::optional<std::string> { throw std::runtime_error("no answer"); });
  REQUIRE(server.is_ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->status == 500);
  CHECK(res->body == "metrics unavailable: store closed\n");
  res = client.Get("/healthz");
  REQUIRE(res);
  CHECK(res->status == 503);
  CHECK(res->body == "health check failed: no answer\n");
}

TEST_CASE("malformed listen addresses are refused with the address named") {
  const char* bad = GENERATE("localhost", "127.0.0.1:", ":9464", "127.0.0.1:65536",
                             "127.0.0.1:94x4", "::1:9464", "127.0.0.1:-1");
  Source src;
  auto server = MetricsServer::start(bad, src.metrics(), src.health());
  REQUIRE_FALSE(server.is_ok());
  CHECK(server.status().code() == Code::kInvalidArgument);
  CHECK(server.status().message().find(bad) != std::string::npos);
}

TEST_CASE("a bracketed IPv6 host is accepted") {
  Source src;
  auto server = MetricsServer::start("[::1]:0", src.metrics(), src.health());
  if (!server.is_ok()) {
    // A host without IPv6 loopback cannot bind ::1; the address itself was accepted.
    CHECK(server.status().code() == Code::kSystem);
    return;
  }
  CHECK((*server)->address() == "[::1]:" + std::to_string((*server)->port()));
  httplib::Client client("::1", (*server)->port());
  auto res = client.Get("/healthz");
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("a port that is already taken is a system error") {
  Source src;
  auto first = start(src);
  auto second = MetricsServer::start("127.0.0.1:" + std::to_string(first->port()), src.metrics(),
                                     src.health());
  REQUIRE_FALSE(second.is_ok());
  CHECK(second.status().code() == Code::kSystem);
}
