#include <sandpool/http/http_service.hpp>

#include <arpa/inet.h>

#include <utility>

#include <sandpool/metrics/http_parts.hpp>
#include <sandpool/metrics/http_server.hpp>
#include "http/api.hpp"
#include "http/dashboard.hpp"
#include "http/http_access.hpp"

namespace sandpool::http {
namespace {

HttpLimits limits_of(const HttpConfig& c) {
  HttpLimits l;
  l.max_connections = c.max_connections;
  l.max_connections_per_client = c.max_connections_per_client;
  l.backlog = static_cast<int>(c.backlog);
  l.max_header_bytes = c.max_header_bytes;
  l.max_headers = c.max_headers;
  l.max_body = c.max_body;
  l.idle_timeout = c.idle_timeout;
  l.header_timeout = c.header_timeout;
  l.body_timeout = c.body_timeout;
  l.write_timeout = c.write_timeout;
  l.serving_threads = c.serving_threads;
  l.queued_requests = c.queued_requests;
  l.max_streams = c.max_streams;
  return l;
}

bool is_ip_literal(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

// The host and port of a Host header or an origin's authority ("h:p", "[v6]:p", "h").
std::pair<std::string, std::string> split_authority(std::string_view a) {
  if (!a.empty() && a.front() == '[') {
    const std::size_t close = a.find(']');
    if (close == std::string_view::npos) return {std::string(a), ""};
    const std::string_view rest = a.substr(close + 1);
    return {std::string(a.substr(1, close - 1)),
            rest.size() > 1 && rest[0] == ':' ? std::string(rest.substr(1)) : ""};
  }
  const std::size_t colon = a.rfind(':');
  if (colon == std::string_view::npos) return {std::string(a), ""};
  return {std::string(a.substr(0, colon)), std::string(a.substr(colon + 1))};
}

// Which Host names and origins this listener answers to. DNS rebinding needs a DNS name in
// the Host header, so an IP literal or `localhost` (and `*.localhost`) is always fine; another name
// must be one of service.http.hosts. An Origin is this listener's own only with its port as well: a
// page of another local server (another port) is another origin.
class HostCheck {
 public:
  HostCheck(const HttpConfig& config, std::uint16_t port) : port_(std::to_string(port)) {
    for (const std::string& h : config.hosts) {
      auto [name, p] = split_authority(h);
      names_.push_back({lower(std::move(name)), p});
    }
  }

  // True iff a Host header `authority` names this listener.
  bool host_ours(std::string_view authority) const {
    auto [host, port] = split_authority(authority);
    host = lower(std::move(host));
    if (host.empty()) return false;
    // `localhost` and `*.localhost` name the loopback in every browser (RFC 6761): no
    // attacker's DNS answers for them.
    const bool local_name =
        host == "localhost" || (host.size() > 10 && host.ends_with(".localhost"));
    if (is_ip_literal(host) || local_name) return true;
    for (const auto& [name, p] : names_) {
      if (name == host && (p.empty() || p == port)) return true;
    }
    return false;
  }

  // True iff `origin` ("http://host:port") is this listener's own pages' origin.
  bool origin_ours(std::string_view origin) const {
    constexpr std::string_view kHttp = "http://";
    if (origin.rfind(kHttp, 0) != 0) return false;
    origin.remove_prefix(kHttp.size());
    const auto [host, port] = split_authority(origin);
    return host_ours(origin) && (port == port_ || (port.empty() && port_ == "80"));
  }

 private:
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  std::string port_;
  std::vector<std::pair<std::string, std::string>> names_;
};

// Every request: its Host names this listener (421 otherwise), and a POST comes from this
// listener's own pages or from no browser page at all (403 otherwise).
HttpServer::Admit gate_for(const HttpConfig& config, std::uint16_t port) {
  return [check = HostCheck(config, port)](const HttpRequest& req, HttpResponse& res) {
    if (req.path == "/healthz") return true;  // probes from anywhere; it tells nothing
    const std::string host = req.header("Host");
    if (!check.host_ours(host)) {
      http_parts::error_answer(res, 421,
                               "Host '" + http_parts::printable(host) +
                                   "' is not this listener's address (a DNS name must be listed in "
                                   "service.http.hosts)");
      return false;
    }
    if (req.method == "GET") return true;
    const std::string origin = req.header("Origin");
    const std::string site = req.header("Sec-Fetch-Site");
    // A browser sends "Origin: null" from an opaque origin (a sandboxed frame, a data: URL)
    // and, under some referrer policies, from a page's own forms: then only the browser's
    // own Sec-Fetch-Site can say the page was ours.
    if (origin == "null") {
      if (site == "same-origin") return true;
      http_parts::error_answer(res, 403,
                               "a request from an opaque origin (Origin: null) changes nothing "
                               "here");
      return false;
    }
    if (!origin.empty()) {
      if (!check.origin_ours(origin)) {
        http_parts::error_answer(res, 403,
                                 "a request from the page of another origin ('" +
                                     http_parts::printable(origin) + "') changes nothing here");
        return false;
      }
      return true;
    }
    if (site == "cross-site" || site == "same-site") {
      http_parts::error_answer(res, 403, "a request from another site's page changes nothing here");
      return false;
    }
    return true;
  };
}

}  // namespace

struct HttpService::Impl {
  explicit Impl(HttpAccess a) : access(std::move(a)) {}
  HttpAccess access;
  std::unique_ptr<Api> api;
  std::unique_ptr<Dashboard> dashboard;
  std::unique_ptr<HttpServer> server;
};

Result<std::unique_ptr<HttpService>> HttpService::start(const HttpConfig& config,
                                                        ControlHandler& handler,
                                                        MetricsServer::TextSource metrics,
                                                        MetricsServer::HealthCheck health,
                                                        HttpServiceOptions options) {
  auto access = HttpAccess::load(config);
  if (!access) return access.status();
  access->set_session_idle_timeout(config.session_idle_timeout);
  const bool v6 = config.host.find(':') != std::string::npos;
  const std::string listen =
      (v6 ? "[" + config.host + "]" : config.host) + ":" + std::to_string(config.port);
  auto server = HttpServer::bind(listen, limits_of(config), "service.http");
  if (!server) return server.status();
  auto impl = std::make_unique<Impl>(std::move(*access));
  impl->server = std::move(*server);
  HttpServer& s = *impl->server;

  ApiOptions api;
  api.max_streams = config.max_streams;
  api.admin_reserved_streams = config.admin_reserved_streams;
  api.flush = options.stream_flush;
  api.heartbeat = options.stream_heartbeat;
  api.call_timeout = config.call_timeout;
  api.max_wait = config.max_wait;
  api.max_json_depth = config.max_json_depth;
  api.deny_anonymous =
      impl->access.has_read_token() || impl->access.has_admin_token() || !is_loopback(config.host);
  api.port = s.port();
  impl->api = std::make_unique<Api>(handler, impl->access, api);

  s.set_gate(gate_for(config, s.port()));
  HttpServer::Admit metrics_admit;
  if (config.metrics_need_token) {
    metrics_admit = [a = impl->api.get()](const HttpRequest& req, HttpResponse& res) {
      auto caller = a->authenticate(req, res, false);
      if (!caller) return false;
      if (caller->access != Access::kAnonymous) return true;
      api_error(res, "unauthorized",
                "/metrics needs the read or admin token (service.http.metrics_access: read)");
      return false;
    };
  }
  add_metrics_routes(s, std::move(metrics), std::move(health), std::move(metrics_admit));
  impl->api->install(s);
  impl->dashboard = std::make_unique<Dashboard>(*impl->api, impl->access);
  impl->dashboard->install(s);
  s.start("sp-http-io");
  return std::unique_ptr<HttpService>(new HttpService(std::move(impl)));
}

HttpService::HttpService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpService::~HttpService() { stop(); }

std::string HttpService::address() const { return impl_->server->address(); }
std::uint16_t HttpService::port() const { return impl_->server->port(); }
bool HttpService::read_only() const { return !impl_->access.has_admin_token(); }

HttpResponse HttpService::serve_one(std::string_view raw) { return impl_->server->serve_one(raw); }

void HttpService::stop() {
  impl_->api->stop();  // first: a serving thread waiting on a call or stream returns
  impl_->server->stop();
}

}  // namespace sandpool::http
