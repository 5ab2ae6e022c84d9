// poold's one HTTP listener (`service.http`, docs/configuration.md): /metrics and /healthz
// (docs/metrics.md), the JSON API under /api/v1/ (api.hpp) and the dashboard at /
// (dashboard.hpp), each request's rights from its token or session (http_access.hpp).
//
// Thread-safety: start() and stop() from one thread (main's); the callbacks and the
// handler run on the listener's serving threads. Lifetime: stop() (or the destructor)
// before the handler and the callbacks' captures go.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <sandpool/base/status.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/control/control.hpp>
#include <sandpool/metrics/metrics.hpp>

#include <sandpool/metrics/http_server.hpp>

namespace sandpool::http {

// For tests: how often event streams flush and beat (ApiOptions).
struct HttpServiceOptions {
  std::chrono::milliseconds stream_flush{250};
  std::chrono::milliseconds stream_heartbeat{10000};
};

class HttpService {
 public:
  // Loads the tokens (HttpAccess::load: a non-loopback listen without one is refused),
  // binds config.host:port and serves, with config's limits (docs/security.md, "The HTTP
  // listener").
  static Result<std::unique_ptr<HttpService>> start(const HttpConfig& config,
                                                    ControlHandler& handler,
                                                    MetricsServer::TextSource metrics,
                                                    MetricsServer::HealthCheck health,
                                                    HttpServiceOptions options = {});
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  std::string address() const;  // "host:port" as bound
  std::uint16_t port() const;
  // True iff no admin token is configured: nothing over HTTP changes the service.
  bool read_only() const;
  // Ends the event streams and waiting calls, stops listening. Idempotent.
  void stop();
  // One request's raw bytes through every check and route, without a socket
  // (HttpServer::serve_one): the fuzzer's way in.
  HttpResponse serve_one(std::string_view raw);

  struct Impl;

 private:
  explicit HttpService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandpool::http
