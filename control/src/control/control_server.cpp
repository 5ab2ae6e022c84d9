// ControlServer: one epoll thread owning the listening socket and every connection.
// Replies from other threads arrive through each connection's Outbox and the Waker's
// eventfd; only this thread touches sockets.
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>
#include <sandpool/base/busy_clock.hpp>
#include <sandpool/base/log_text.hpp>
#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/thread_name.hpp>
#include <sandpool/control/control.hpp>

#include "control/connection.hpp"
#include "control/connection_budget.hpp"
#include "control/listen_socket.hpp"

namespace sandpool {

using control::Connection;

// A client names itself in its hello; the log shows at most this much of the name.
constexpr std::size_t kMaxClientNameInLog = 256;

class ControlServer::Impl {
 public:
  Impl(ControlServerOptions options, ControlHandler& handler, control::ListeningSocket listener,
       UniqueFd epoll, std::shared_ptr<control::Waker> waker)
      : options_(std::move(options)),
        handler_(handler),
        listener_(std::move(listener)),
        epoll_(std::move(epoll)),
        waker_(std::move(waker)),
        budget_(std::make_shared<control::ConnectionBudget>(control::BudgetLimits{
            options_.max_connections, options_.admin_reserved_connections,
            options_.max_connections_per_uid, options_.max_streams_per_connection,
            options_.max_streams_per_uid})),
        server_uid_(::geteuid()) {}

  ~Impl() {
    stop();
    if (listener_.fd) control::unlink_if_ours(options_.path, listener_);  // never ran
  }

  Status begin() EXCLUDES(stop_mu_) {
    SP_RETURN_IF_ERROR(watch(listener_.fd.get(), kListenKey, EPOLLIN));
    SP_RETURN_IF_ERROR(watch(waker_->eventfd.get(), kWakeKey, EPOLLIN));
    MutexLock lock(stop_mu_);  // no stop() can run yet; taken for the checker
    thread_ = std::thread([this] {
      server_thread_id_.store(std::this_thread::get_id());
      name_thread(::pthread_self(), "sp-control");
      if (options_.thread_nice != 0 &&
          ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), options_.thread_nice) != 0) {
        spdlog::debug("control: setpriority({}) on the server thread: {}", options_.thread_nice,
                      std::strerror(errno));
      }
      run();
    });
    return Status::ok();
  }

  void stop() EXCLUDES(stop_mu_) {
    stopping_.store(true);
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(waker_->eventfd.get(), &one, sizeof one);
    // From the handler (the server thread itself): the loop ends when handle() returns;
    // the destructor, on another thread, joins it.
    if (std::this_thread::get_id() == server_thread_id_.load()) return;
    MutexLock lock(stop_mu_);
    if (thread_.joinable()) thread_.join();
  }

  const std::string& path() const { return options_.path; }
  std::size_t connection_count() const { return count_.load(); }
  std::int64_t busy_for_ns() const { return busy_.busy_for_ns(BusyClock::now_ns()); }

 private:
  static constexpr std::uint64_t kListenKey = 0;
  static constexpr std::uint64_t kWakeKey = 1;

  Status watch(int fd, std::uint64_t key, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    auto r = posix_call("epoll_ctl(ADD)",
                        [&] { return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev); });
    return r.status();
  }

  void run() {
    epoll_event events[64];
    while (!stopping_.load()) {
      busy_.end();  // poold's watchdog: waiting is idle
      const int n = ::epoll_wait(epoll_.get(), events, 64, wait_ms());
      busy_.begin(BusyClock::now_ns());  // what this wake-up brought is one item of work
      if (n < 0) {
        if (errno == EINTR) continue;
        spdlog::error("control: epoll_wait: {}", std::strerror(errno));
        break;
      }
      close_silent_connections();
      close_idle_connections();
      for (int i = 0; i < n && !stopping_.load(); ++i) {
        const std::uint64_t key = events[i].data.u64;
        if (key == kListenKey) {
          accept_all();
        } else if (key == kWakeKey) {
          std::uint64_t count = 0;
          [[maybe_unused]] ssize_t r = ::read(waker_->eventfd.get(), &count, sizeof count);
          for (std::uint64_t k : waker_->take()) flush(k);
        } else {
          // What one peer sent must not end poold: a failure the connection's own checks
          // missed closes that connection only.
          try {
            service(key, events[i].events);
          } catch (const std::exception& e) {
            spdlog::error("control: a connection failed and is closed: {}", e.what());
            if (conns_.count(key) != 0) close_connection(key, nullptr);
          }
        }
      }
    }
    // Best effort: replies already queued (the answer to `shutdown`) go out if the
    // socket takes them now; nothing waits for a slow peer.
    for (auto& [key, conn] : conns_) (void)conn->write_output();
    while (!conns_.empty()) close_connection(conns_.begin()->first, nullptr);
    control::unlink_if_ours(options_.path, listener_);
    listener_.fd.reset();
    busy_.end();
  }

  // epoll_wait's timeout: until the oldest connection still owing its hello is due; -1
  // when none is.
  int hello_wait_ms() {
    while (!awaiting_hello_.empty()) {
      auto it = conns_.find(awaiting_hello_.front().second);
      if (it != conns_.end() && !it->second->hello_done()) break;
      awaiting_hello_.pop_front();  // said hello, or already closed
    }
    if (awaiting_hello_.empty()) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        awaiting_hello_.front().first - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
  }

  // epoll_wait's timeout: the earlier of the next hello deadline and the next idle sweep.
  int wait_ms() {
    int ms = hello_wait_ms();
    if (options_.idle_timeout.count() > 0 && !conns_.empty()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          next_idle_sweep_ - std::chrono::steady_clock::now());
      const int sweep = static_cast<int>(std::max<std::int64_t>(0, left.count()));
      ms = ms < 0 ? sweep : std::min(ms, sweep);
    }
    return ms;
  }

  // Sweeps the connections past their hello every idle_timeout / 8 (10 ms .. 1 s), so one
  // is closed at most that much after its idle_timeout ran out.
  void close_idle_connections() {
    if (options_.idle_timeout.count() <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_idle_sweep_) return;
    next_idle_sweep_ = now + std::clamp<std::chrono::milliseconds>(options_.idle_timeout / 8,
                                                                   std::chrono::milliseconds(10),
                                                                   std::chrono::milliseconds(1000));
    std::vector<std::uint64_t> idle;
    for (const auto& [key, conn] : conns_) {
      if (conn->hello_done() && conn->idle_for(now) >= options_.idle_timeout) idle.push_back(key);
    }
    for (std::uint64_t key : idle) {
      const std::string why = "idle for " + std::to_string(options_.idle_timeout.count()) +
                              " ms (no request open); closing the connection";
      control::refuse(conns_.at(key)->fd.get(), "timeout", why);
      close_connection(key, "idle");
    }
  }

  // Connections are admitted in deadline order, so the due ones are at the front.
  void close_silent_connections() {
    const auto now = std::chrono::steady_clock::now();
    while (!awaiting_hello_.empty() && awaiting_hello_.front().first <= now) {
      const std::uint64_t key = awaiting_hello_.front().second;
      awaiting_hello_.pop_front();
      auto it = conns_.find(key);
      if (it == conns_.end() || it->second->hello_done()) continue;
      const std::string why =
          "no hello within " + std::to_string(options_.hello_timeout.count()) + " ms";
      control::refuse(it->second->fd.get(), "timeout", why);
      close_connection(key, "no hello in time");
    }
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          spdlog::warn("control: accept4: {}", std::strerror(errno));
        }
        return;
      }
      admit(UniqueFd(fd));
    }
  }

  void admit(UniqueFd fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("control: getsockopt(SO_PEERCRED): {}", std::strerror(errno));
      return;
    }
    PeerCredentials peer{cred.pid, cred.uid, cred.gid};
    const Rights rights = rights_for(peer, options_.access, server_uid_);
    if (rights == Rights::kNone) {
      spdlog::warn("control: refused pid {} uid {} gid {}: not in the allow-list", peer.pid,
                   peer.uid, peer.gid);
      control::refuse(fd.get(), "forbidden",
                      "uid " + std::to_string(peer.uid) + " may not use this service");
      return;
    }
    const bool admin = rights == Rights::kAdmin;
    if (auto refusal = budget_->admit(peer.uid, admin)) {
      spdlog::warn("control: refused pid {} uid {}: {}", peer.pid, peer.uid, *refusal);
      control::refuse(fd.get(), "busy", *refusal);
      return;
    }
    const std::uint64_t key = next_key_++;
    auto conn = std::make_unique<Connection>(key, std::move(fd), peer, rights, options_, waker_,
                                             handler_, budget_);
    if (!watch(conn->fd.get(), key, EPOLLIN).is_ok()) {
      budget_->leave(peer.uid, admin);
      return;
    }
    conn->epoll_mask = EPOLLIN;
    conns_.emplace(key, std::move(conn));
    if (options_.hello_timeout.count() > 0) {
      awaiting_hello_.emplace_back(std::chrono::steady_clock::now() + options_.hello_timeout, key);
    }
    count_.store(conns_.size());
  }

  void service(std::uint64_t key, std::uint32_t events) {
    auto it = conns_.find(key);
    if (it == conns_.end()) return;
    Connection& c = *it->second;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      const char* why = c.read_input();
      if (why) return close_connection(key, why);
    }
    flush(key);
  }

  void flush(std::uint64_t key) {
    auto it = conns_.find(key);
    if (it == conns_.end()) return;
    Connection& c = *it->second;
    const char* why = c.write_output();
    if (why) return close_connection(key, why);
    const std::uint32_t want = c.wants_output() ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    if (want != c.epoll_mask) {
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = key;
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) == 0) c.epoll_mask = want;
    }
  }

  // why: null for a server stop (not logged per connection).
  void close_connection(std::uint64_t key, const char* why) {
    auto it = conns_.find(key);
    if (it == conns_.end()) return;
    std::unique_ptr<Connection> conn = std::move(it->second);
    conns_.erase(it);
    count_.store(conns_.size());
    if (why && conn->log_close) {
      spdlog::warn("control: closed connection of pid {} uid {} ({}): {}", conn->peer.pid,
                   conn->peer.uid, log_text(conn->client_name, kMaxClientNameInLog), why);
    }
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn->fd.get(), nullptr);
    conn->fd.reset();
    conn->abandon();
    budget_->leave(conn->peer.uid, conn->admin());
  }

  const ControlServerOptions options_;
  ControlHandler& handler_;
  control::ListeningSocket listener_;
  UniqueFd epoll_;
  std::shared_ptr<control::Waker> waker_;
  const std::shared_ptr<control::ConnectionBudget> budget_;
  const uid_t server_uid_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> conns_;
  // (deadline, key) of connections admitted without a hello yet, oldest first.
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> awaiting_hello_;
  std::chrono::steady_clock::time_point next_idle_sweep_{};
  std::uint64_t next_key_ = 2;
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> stopping_{false};
  BusyClock busy_;  // the server thread's, for poold's watchdog
  std::atomic<std::thread::id> server_thread_id_{};
  Mutex stop_mu_;  // serialises stop()'s join
  std::thread thread_ GUARDED_BY(stop_mu_);
};

Result<std::unique_ptr<ControlServer>> ControlServer::start(ControlServerOptions options,
                                                            ControlHandler& handler) {
  auto listener = control::listen_unix(options.path, options.mode, options.group);
  if (!listener) return listener.status();
  auto ep = posix_call("epoll_create1", [] { return ::epoll_create1(EPOLL_CLOEXEC); });
  if (!ep) return ep.status();
  auto ev = posix_call("eventfd", [] { return ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); });
  if (!ev) return ev.status();
  auto waker = std::make_shared<control::Waker>();
  waker->eventfd.reset(*ev);
  auto impl = std::make_unique<Impl>(std::move(options), handler, std::move(listener).value(),
                                     UniqueFd(*ep), std::move(waker));
  SP_RETURN_IF_ERROR(impl->begin());
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlServer::~ControlServer() { stop(); }
void ControlServer::stop() { impl_->stop(); }
const std::string& ControlServer::path() const { return impl_->path(); }
std::size_t ControlServer::connection_count() const { return impl_->connection_count(); }
std::int64_t ControlServer::busy_for_ns() const { return impl_->busy_for_ns(); }

}  // namespace sandpool
