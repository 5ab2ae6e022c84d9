#include <sandpool/metrics/http_server.hpp>

#include <sys/resource.h>

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <regex>
#include <string>

#include <spdlog/spdlog.h>

#include <sandpool/base/thread_name.hpp>

#include <sandpool/metrics/http_parts.hpp>
#include "metrics/http_server_impl.hpp"

namespace sandpool {
namespace {

using http_internal::add_default_headers;
using http_internal::answer_one;
using http_internal::Connection;
using http_internal::tcp;
namespace beast = http_internal::beast;
namespace net = http_internal::net;

// Raises the soft open-files limit to the hard one: each connection holds a descriptor.
// Returns the soft limit now.
rlim_t raise_open_files() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
  }
  return r.rlim_cur;
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopping.load() || ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE) and the like: retry soon instead of spinning.
      spdlog::warn("http: accept on {}:{}: {}", host, port, ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  std::string client = remote.address().to_string();
  std::size_t& mine = per_client[client];
  if (mine >= limits.max_connections_per_client && !evict_oldest_waiting(&client)) {
    if (mine == 0) per_client.erase(client);
    return;  // the socket closes as it goes
  }
  if (connections.size() >= limits.max_connections && !evict_oldest_waiting(nullptr)) {
    if (per_client[client] == 0) per_client.erase(client);
    return;
  }
  ++per_client[client];
  auto conn = std::make_shared<Connection>(*this, std::move(socket), client);
  conn->where = connections.insert(connections.end(), conn);
  open.store(connections.size());
  conn->start();
}

bool HttpServer::Impl::evict_oldest_waiting(const std::string* client) {
  for (auto& c : connections) {
    if (c->state != Connection::State::kWaiting) continue;
    if (client != nullptr && c->client != *client) continue;
    auto victim = c;  // close() erases it from the list
    victim->close();
    return true;
  }
  return false;
}

void HttpServer::Impl::forget(Connection& c) {
  auto keep = *c.where;  // the last owner may be the list itself
  connections.erase(c.where);
  if (auto it = per_client.find(c.client); it != per_client.end() && --it->second == 0) {
    per_client.erase(it);
  }
  open.store(connections.size());
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(std::string_view listen, HttpLimits limits,
                                                     std::string_view what) {
  auto where = http_parts::parse_listen(listen, what);
  if (!where) return where.status();
  const rlim_t files = raise_open_files();
  if (files < limits.max_connections + 256) {
    const std::size_t fit = files > 512 ? static_cast<std::size_t>(files) - 256 : 256;
    spdlog::warn(
        "{}: max_connections {} does not fit the open-files limit {} (RLIMIT_NOFILE, "
        "LimitNOFILE= under systemd): serving at most {}",
        what, limits.max_connections, files, fit);
    limits.max_connections = fit;
  }
  auto impl = std::make_unique<Impl>(limits);
  beast::error_code ec;
  const auto address =
      net::ip::make_address(where->host == "localhost" ? "127.0.0.1" : where->host, ec);
  if (ec) {
    return Status::invalid(std::string(what) + " listen address '" + std::string(listen) + "': '" +
                           where->host + "' is not an IP address");
  }
  const tcp::endpoint endpoint(address, where->port);
  const std::string msg = std::string(what) + ": listen on " + std::string(listen);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    // SO_REUSEADDR, not SO_REUSEPORT (which lets a second service take half the requests):
    // a quick restart still binds.
    impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(limits.backlog, ec);
  if (ec) return Status::from_errno(ec.value(), msg);
  impl->host = where->host;
  impl->port = impl->acceptor.local_endpoint(ec).port();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::add(Route route) { impl_->routes.push_back(std::move(route)); }

void HttpServer::get(std::string path, Lane lane, Handler handler) {
  add(Route{"GET", std::regex(path), lane, false, {}, std::move(handler)});
}

void HttpServer::set_gate(Admit gate) { impl_->gate = std::move(gate); }

void HttpServer::start(const char* thread_name) {
  impl_->accept();
  impl_->io_thread = std::thread([this] {
    while (true) {
      try {
        impl_->ioc.run();
        return;
      } catch (const std::exception& e) {
        // A completion handler threw: log it and keep serving the others.
        spdlog::error("http: the I/O loop caught: {}", e.what());
      }
    }
  });
  name_thread(impl_->io_thread.native_handle(), thread_name);
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  {
    MutexLock lock(s.stream_mu);
    s.stream_cv.notify_all();
  }
  // Handlers first (their replies are posted to the loop, which still runs).
  s.api.stop();
  s.probe.stop();
  s.metrics.stop();
  auto close_all = [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_retry.cancel();
    while (!s.connections.empty()) s.connections.front()->close();
  };
  if (s.io_thread.joinable()) {
    auto closed = std::make_shared<std::promise<void>>();
    auto done = closed->get_future();
    net::post(s.ioc, [close_all, closed] {
      close_all();
      closed->set_value();
    });
    // The loop runs it at once unless a handler is stuck; either way the socket is closed
    // below once the loop has stopped.
    (void)done.wait_for(std::chrono::seconds(2));
  }
  // Streams end at their next write or wait (stopping is set).
  std::list<Impl::StreamThread> streams;
  {
    MutexLock lock(s.stream_mu);
    streams.swap(s.streams);
  }
  for (auto& t : streams) t.thread.join();
  s.ioc.stop();
  if (s.io_thread.joinable()) s.io_thread.join();
  // The loop no longer runs: what it did not close is closed here, on this thread.
  close_all();
}

HttpResponse HttpServer::serve_one(std::string_view raw) {
  HttpResponse res = answer_one(*impl_, raw);
  if (res.status != 0) add_default_headers(res);  // as Connection::respond does
  return res;
}

std::uint16_t HttpServer::port() const { return impl_->port; }
const std::string& HttpServer::host() const { return impl_->host; }
std::string HttpServer::address() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return (v6 ? "[" + impl_->host + "]" : impl_->host) + ":" + std::to_string(impl_->port);
}
const HttpLimits& HttpServer::limits() const { return impl_->limits; }
std::size_t HttpServer::open_connections() const { return impl_->open.load(); }

void add_metrics_routes(HttpServer& server, std::function<std::string()> metrics,
                        std::function<std::optional<std::string>()> health,
                        HttpServer::Admit metrics_admit) {
  server.add(
      {"GET", std::regex("/metrics"), HttpServer::Lane::kMetrics, false, std::move(metrics_admit),
       [metrics = std::move(metrics)](const HttpRequest&, HttpResponse& res) {
         try {
           res.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
         } catch (const std::exception& e) {
           res.status = 500;
           res.set_content(std::string("metrics unavailable: ") + e.what() + "\n", "text/plain");
         }
       }});
  server.get("/healthz", HttpServer::Lane::kProbe,
             [health = std::move(health)](const HttpRequest&, HttpResponse& res) {
               std::optional<std::string> problem;
               try {
                 problem = health();
               } catch (const std::exception& e) {
                 problem = std::string("health check failed: ") + e.what();
               }
               res.status = problem ? 503 : 200;
               res.set_content(problem ? *problem + "\n" : std::string("ok\n"), "text/plain");
             });
}

}  // namespace sandpool
