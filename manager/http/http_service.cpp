#include "http/http_service.hpp"

#include <utility>

#include "http/api.hpp"
#include "http/dashboard.hpp"
#include "http/http_access.hpp"
#include "metrics/http_listener.hpp"

namespace sandpool::http {

struct HttpService::Impl {
  explicit Impl(HttpAccess a) : access(std::move(a)) {}
  HttpAccess access;
  std::unique_ptr<Api> api;
  std::unique_ptr<Dashboard> dashboard;
  std::unique_ptr<HttpListener> listener;
};

Result<std::unique_ptr<HttpService>> HttpService::start(const HttpConfig& config,
                                                        ControlHandler& handler,
                                                        MetricsServer::TextSource metrics,
                                                        MetricsServer::HealthCheck health,
                                                        HttpServiceOptions options) {
  auto access = HttpAccess::load(config);
  if (!access) return access.status();
  const bool v6 = config.host.find(':') != std::string::npos;
  const std::string listen =
      (v6 ? "[" + config.host + "]" : config.host) + ":" + std::to_string(config.port);
  auto listener = HttpListener::bind(listen, options.serving_threads, "service.http");
  if (!listener) return listener.status();
  auto impl = std::make_unique<Impl>(std::move(*access));
  impl->listener = std::move(*listener);
  httplib::Server& server = impl->listener->server();
  // A browser keeps a few connections open, each holding a serving thread while it idles.
  server.set_keep_alive_timeout(2);
  server.set_payload_max_length(64u << 20);
  add_metrics_routes(server, std::move(metrics), std::move(health));
  impl->api = std::make_unique<Api>(handler, impl->access, ApiOptions{options.max_streams});
  impl->api->install(server);
  impl->dashboard = std::make_unique<Dashboard>(*impl->api, impl->access);
  impl->dashboard->install(server);
  impl->listener->start("sp-http");
  return std::unique_ptr<HttpService>(new HttpService(std::move(impl)));
}

HttpService::HttpService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpService::~HttpService() { stop(); }

std::string HttpService::address() const { return impl_->listener->address(); }
std::uint16_t HttpService::port() const { return impl_->listener->port(); }
bool HttpService::read_only() const { return !impl_->access.has_admin_token(); }

void HttpService::stop() {
  impl_->api->stop();  // first: a serving thread waiting on a call or stream returns
  impl_->listener->stop();
}

}  // namespace sandpool::http
