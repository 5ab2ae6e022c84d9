#include "metrics/http_listener.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <exception>

#include <sandpool/thread_name.hpp>

namespace sandpool {
namespace {

constexpr const char* kTextFormat = "text/plain; version=0.0.4; charset=utf-8";

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

Result<HostPort> parse_listen(std::string_view listen, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    return Status::invalid(std::string(what) + " listen address '" + std::string(listen) +
                           "': " + std::string(why) + " (expected host:port, e.g. 127.0.0.1:9464)");
  };
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = listen.substr(0, colon);
  const std::string_view port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 host goes in brackets");
  }
  if (host.empty()) return bad("no host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  return HostPort{std::string(host), static_cast<std::uint16_t>(value)};
}

}  // namespace

Result<std::unique_ptr<HttpListener>> HttpListener::bind(std::string_view listen,
                                                         std::size_t serving_threads,
                                                         std::string_view what) {
  auto where = parse_listen(listen, what);
  if (!where) return where.status();
  std::unique_ptr<HttpListener> l(new HttpListener());
  httplib::Server& server = l->server_;
  server.new_task_queue = [serving_threads] { return new httplib::ThreadPool(serving_threads); };
  // httplib's default sets SO_REUSEPORT, which lets a second service bind the same port and
  // silently take half the requests. SO_REUSEADDR alone still allows a quick restart.
  server.set_socket_options([](int fd) {
    const int yes = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // best effort
  });
  int port = where->port;
  errno = 0;
  if (port == 0) {
    port = server.bind_to_any_port(where->host);
  } else if (!server.bind_to_port(where->host, port)) {
    port = -1;
  }
  if (port < 0) {
    // httplib reports only failure; errno from getaddrinfo/bind/listen is what is left of
    // the cause.
    const std::string msg = std::string(what) + ": listen on " + std::string(listen);
    if (errno != 0) return Status::from_errno(errno, msg);
    return Status::error(Code::kSystem, msg + ": the address cannot be bound");
  }
  l->host_ = where->host;
  l->port_ = static_cast<std::uint16_t>(port);
  return l;
}

HttpListener::~HttpListener() { stop(); }

void HttpListener::start(const char* thread_name) {
  thread_ = std::thread([this] {
    server_.listen_after_bind();
    std::lock_guard lock(mu_);
    listen_returned_ = true;
    cv_.notify_all();
  });
  name_thread(thread_.native_handle(), thread_name);
}

std::string HttpListener::address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

void HttpListener::stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until the listening thread has marked itself running, and
  // says nothing when it does: ask again until the thread has left listen_after_bind().
  std::unique_lock lock(mu_);
  while (!listen_returned_) {
    server_.stop();
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  lock.unlock();
  thread_.join();
}

void add_metrics_routes(httplib::Server& server, MetricsServer::TextSource metrics,
                        MetricsServer::HealthCheck health) {
  server.Get(
      "/metrics", [metrics = std::move(metrics)](const httplib::Request&, httplib::Response& res) {
        try {
          res.set_content(metrics(), kTextFormat);
        } catch (const std::exception& e) {
          res.status = 500;
          res.set_content(std::string("metrics unavailable: ") + e.what() + "\n", "text/plain");
        }
      });
  server.Get("/healthz",
             [health = std::move(health)](const httplib::Request&, httplib::Response& res) {
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
