#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>
#include <sandpool/metrics.hpp>
#include <sandpool/thread_name.hpp>

namespace sandpool {
namespace {

constexpr const char* kTextFormat = "text/plain; version=0.0.4; charset=utf-8";
// Scrapes are rare and small: two serving threads, not httplib's default of one per CPU.
constexpr std::size_t kServingThreads = 2;

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

Result<HostPort> parse_listen(std::string_view listen) {
  const auto bad = [&](std::string_view why) {
    return Status::invalid("metrics listen address '" + std::string(listen) +
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

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool listen_returned = false;  // guarded by mu
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(std::string_view listen,
                                                            TextSource metrics,
                                                            HealthCheck health) {
  auto where = parse_listen(listen);
  if (!where) return where.status();
  auto impl = std::make_unique<Impl>();
  httplib::Server& server = impl->server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kServingThreads); };
  // httplib's default sets SO_REUSEPORT, which lets a second service bind the same port and
  // silently take half the scrapes. SO_REUSEADDR alone still allows a quick restart.
  server.set_socket_options([](int fd) {
    const int yes = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // best effort
  });
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
    const std::string what = "metrics: listen on " + std::string(listen);
    if (errno != 0) return Status::from_errno(errno, what);
    return Status::error(Code::kSystem, what + ": the address cannot be bound");
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    std::lock_guard lock(raw->mu);
    raw->listen_returned = true;
    raw->cv.notify_all();
  });
  name_thread(impl->thread.native_handle(), "sp-metrics");
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(impl), where->host, static_cast<std::uint16_t>(port)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string host, std::uint16_t port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

MetricsServer::~MetricsServer() { stop(); }

std::string MetricsServer::address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

void MetricsServer::stop() {
  if (!impl_->thread.joinable()) return;
  // httplib's stop() does nothing until the listening thread has marked itself running, and
  // says nothing when it does: ask again until the thread has left listen_after_bind().
  std::unique_lock lock(impl_->mu);
  while (!impl_->listen_returned) {
    impl_->server.stop();
    impl_->cv.wait_for(lock, std::chrono::milliseconds(10));
  }
  lock.unlock();
  impl_->thread.join();
}

}  // namespace sandpool
