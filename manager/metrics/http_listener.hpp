// The HTTP listener poold and the MetricsServer share: one cpp-httplib server bound to
// "host:port" and served on a thread of its own with a bounded pool of serving threads;
// and the /metrics and /healthz routes (docs/metrics.md).
//
// Thread-safety: add routes to server() before start(); port(), address() and stop() from
// any thread but the server's. Lifetime: ~HttpListener() stops it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <httplib.h>
#include <sandpool/metrics.hpp>
#include <sandpool/status.hpp>

namespace sandpool {

class HttpListener {
 public:
  // Binds `listen` ("host:port", "[v6 host]:port"; port 0 picks a free port) for
  // `serving_threads` threads. Errors name `what` (the config key): kInvalidArgument for a
  // malformed address, kSystem when it cannot be bound.
  static Result<std::unique_ptr<HttpListener>> bind(std::string_view listen,
                                                    std::size_t serving_threads,
                                                    std::string_view what);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  httplib::Server& server() { return server_; }
  // Starts serving on a thread named `thread_name`.
  void start(const char* thread_name);
  // Stops listening, waits for the serving threads to end. Idempotent.
  void stop();
  std::uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  std::string address() const;  // "host:port" as bound ([v6]:port)

 private:
  HttpListener() = default;
  httplib::Server server_;
  std::string host_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool listen_returned_ = false;  // guarded by mu_
};

// GET /metrics (the text `metrics` returns) and GET /healthz (200 "ok", or 503 with the
// reason `health` gives).
void add_metrics_routes(httplib::Server& server, MetricsServer::TextSource metrics,
                        MetricsServer::HealthCheck health);

}  // namespace sandpool
