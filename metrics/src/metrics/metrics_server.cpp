#include <sandpool/metrics/metrics.hpp>

#include <sandpool/metrics/http_server.hpp>

namespace sandpool {
namespace {

// Scrapes are rare and small: the /metrics and /healthz lanes serve them; two API threads
// are never used.
HttpLimits metrics_limits() {
  HttpLimits l;
  l.serving_threads = 1;
  l.queued_requests = 4;
  l.max_connections = 256;
  l.max_connections_per_client = 64;
  l.max_streams = 0;
  return l;
}

}  // namespace

struct MetricsServer::Impl {
  std::unique_ptr<HttpServer> server;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view listen,
                                                            TextSource metrics,
                                                            HealthCheck health) {
  auto server = HttpServer::bind(listen, metrics_limits(), "metrics");
  if (!server) return server.status();
  add_metrics_routes(**server, std::move(metrics), std::move(health));
  (*server)->start("sp-metrics");
  auto impl = std::make_unique<Impl>();
  const std::string host = (*server)->host();
  const std::uint16_t port = (*server)->port();
  impl->server = std::move(*server);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), host, port));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string host, std::uint16_t port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

MetricsServer::~MetricsServer() { stop(); }

std::string MetricsServer::address() const { return impl_->server->address(); }

void MetricsServer::stop() { impl_->server->stop(); }

}  // namespace sandpool
