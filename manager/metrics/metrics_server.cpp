#include <sandpool/metrics.hpp>

#include "metrics/http_listener.hpp"

namespace sandpool {
namespace {

// Scrapes are rare and small: two serving threads, not httplib's default of one per CPU.
constexpr std::size_t kServingThreads = 2;

}  // namespace

struct MetricsServer::Impl {
  std::unique_ptr<HttpListener> listener;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view listen,
                                                            TextSource metrics,
                                                            HealthCheck health) {
  auto listener = HttpListener::bind(listen, kServingThreads, "metrics");
  if (!listener) return listener.status();
  add_metrics_routes((*listener)->server(), std::move(metrics), std::move(health));
  (*listener)->start("sp-metrics");
  auto impl = std::make_unique<Impl>();
  const std::string host = (*listener)->host();
  const std::uint16_t port = (*listener)->port();
  impl->listener = std::move(*listener);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), host, port));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string host, std::uint16_t port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

MetricsServer::~MetricsServer() { stop(); }

std::string MetricsServer::address() const { return impl_->listener->address(); }

void MetricsServer::stop() { impl_->listener->stop(); }

}  // namespace sandpool
