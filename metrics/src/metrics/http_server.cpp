#include <sandpool/metrics/http_server.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <future>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include <sandpool/base/thread_name.hpp>

#include <sandpool/metrics/http_parts.hpp>

namespace sandpool {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Parser = bhttp::request_parser<bhttp::string_body>;

std::string text_of(boost::string_view s) { return std::string(s.data(), s.size()); }

// A bounded queue of jobs served by a fixed set of threads. post() never blocks.
class WorkQueue {
 public:
  WorkQueue(std::string name, std::size_t threads, std::size_t queue)
      : name_(std::move(name)), max_queued_(queue) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i) {
      threads_.emplace_back([this] { run(); });
      name_thread(threads_.back().native_handle(), name_.c_str());
    }
  }
  ~WorkQueue() { stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // A job runs on a serving thread and returns what is to happen once that thread counts as
  // free again: the answer's delivery, so a client holding its answer never finds the thread
  // it used still busy.
  using Job = std::function<std::function<void()>()>;

  // False when every thread is busy and the queue is full, or the queue stopped.
  bool post(Job job) {
    {
      std::lock_guard lock(mu_);
      // A job waits only while every thread is busy: room for a thread each, and the queue.
      if (stopping_ || jobs_.size() + busy_ >= threads_.size() + max_queued_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  // Lets the running jobs end, drops the queued ones, joins. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      jobs_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
      lock.unlock();
      // Never throws: Connection::dispatch's job catches what a handler throws.
      std::function<void()> then = job();
      job = nullptr;
      lock.lock();
      --busy_;
      lock.unlock();
      if (then) then();
      then = nullptr;
      lock.lock();
    }
  }

  const std::string name_;
  const std::size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // guarded by mu_
  std::size_t busy_ = 0;   // threads running a job, guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

// The headers every answer carries unless its handler set its own.
void add_default_headers(HttpResponse& res) {
  auto add = [&](std::string_view name, std::string value) {
    if (res.headers.find(name) == res.headers.end()) res.set_header(name, std::move(value));
  };
  add("X-Content-Type-Options", "nosniff");
  add("Referrer-Policy", "same-origin");
  add("Cache-Control", "no-store");
  add("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
  add("X-Frame-Options", "DENY");
}

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

// ---------------------------------------------------------------------------------------
// One connection, owned by the I/O thread (every member is touched there only, but for
// what the comments say). States, each with its deadline (tcp_stream's expiry):
//   kWaiting   reading a request header (idle or header timeout); evictable
//   kBusy      reading a body, serving, or writing an answer (body or write timeout)
//   kStreaming an event stream's thread writes chunks (write timeout each)
//   kClosed
struct Connection : std::enable_shared_from_this<Connection> {
  enum class State { kWaiting, kBusy, kStreaming, kClosed };

  Connection(HttpServer::Impl& s, tcp::socket socket, std::string client_address)
      : server(s), stream(std::move(socket)), client(std::move(client_address)) {}

  void start() { read_header(); }
  void read_header();
  void on_header(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  void dispatch();
  void respond(HttpResponse res);
  void fail(int status, std::string message);
  void on_written(beast::error_code ec, bool keep_alive);
  void linger_close();
  // One read of linger_close()'s drain: drops what arrives, `budget` bytes at most in all.
  void linger_read(std::shared_ptr<std::array<char, 16384>> sink, std::size_t budget);
  void close();
  // Event streams: the header written, then chunks from the stream's thread.
  void begin_stream(HttpResponse res);
  void write_chunk(std::shared_ptr<std::string> chunk, std::function<void(bool)> done);

  HttpServer::Impl& server;
  beast::tcp_stream stream;
  std::string client;
  std::list<std::shared_ptr<Connection>>::iterator where;  // in server.connections
  beast::flat_buffer buffer;
  std::optional<Parser> parser;
  HttpRequest request;
  const HttpServer::Route* route = nullptr;
  State state = State::kWaiting;
  bool first = true;         // no request served yet: header_timeout, not idle_timeout
  bool body_unread = false;  // answered before the body: linger before closing
  std::shared_ptr<bhttp::response<bhttp::string_body>> out;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> stream_head;
  std::shared_ptr<bhttp::response_serializer<bhttp::empty_body>> stream_sr;
};

struct HttpServer::Impl {
  explicit Impl(const HttpLimits& l)
      : limits(l),
        probe("sp-http-probe", 1, 32),
        metrics("sp-http-metrics", 1, 8),
        api("sp-http", l.serving_threads, l.queued_requests) {}

  WorkQueue& lane(HttpServer::Lane l) {
    switch (l) {
      case HttpServer::Lane::kProbe:
        return probe;
      case HttpServer::Lane::kMetrics:
        return metrics;
      case HttpServer::Lane::kApi:
        break;
    }
    return api;
  }

  void accept();
  void admit(tcp::socket socket);
  // Closes the connection that has waited longest for a request header (of `client`, or of
  // anyone when empty). Returns false when every connection is busy.
  bool evict_oldest_waiting(const std::string* client);
  void forget(Connection& c);
  bool start_stream(const std::shared_ptr<Connection>& conn, std::function<void(StreamSink&)> fn);
  void join_finished_streams();

  HttpLimits limits;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::string host;
  std::uint16_t port = 0;
  std::vector<HttpServer::Route> routes;
  HttpServer::Admit gate;
  WorkQueue probe, metrics, api;
  std::thread io_thread;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> open{0};

  // The I/O thread's own: every open connection, oldest first, and the count per client.
  std::list<std::shared_ptr<Connection>> connections;
  std::unordered_map<std::string, std::size_t> per_client;

  // Event streams, each on a thread of its own.
  std::mutex stream_mu;
  std::condition_variable stream_cv;  // notified when stop() begins
  struct StreamThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<StreamThread> streams;  // guarded by stream_mu
  std::size_t active_streams = 0;   // guarded by stream_mu
};

namespace {

// An answer that ends the request where it stands: the connection closes after it.
HttpResponse failure(int status, std::string_view message) {
  HttpResponse res;
  http_parts::error_answer(res, status, message);
  res.close = true;
  return res;
}

// What a request's complete header decides: the answer when it stops here, or nullopt with
// `*route` chosen. Fills `req` from the header (fields, method, decoded target).
std::optional<HttpResponse> decide_head(const HttpServer::Impl& s, const Parser& parser,
                                        HttpRequest& req, const HttpServer::Route** route) {
  const auto& head = parser.get();
  std::size_t fields = 0;
  for (const auto& f : head) {
    if (++fields > s.limits.max_headers) {
      return failure(431, "more than service.http.max_headers (" +
                              std::to_string(s.limits.max_headers) + ") header fields");
    }
    req.headers.emplace(text_of(f.name_string()), text_of(f.value()));
  }
  req.method = text_of(head.method_string());
  req.target = text_of(head.target());
  if (const Status target = http_parts::split_target(req.target, &req); !target) {
    return failure(400, target.message());
  }
  HttpResponse refused;
  refused.close = true;
  if (s.gate && !s.gate(req, refused)) return refused;
  bool other_method = false;
  for (const auto& r : s.routes) {
    std::smatch m;
    if (!std::regex_match(req.path, m, r.path)) continue;
    if (r.method != req.method) {
      other_method = true;
      continue;
    }
    *route = &r;
    for (const auto& g : m) req.matches.push_back(g.str());
    break;
  }
  if (*route == nullptr) {
    return failure(other_method ? 405 : 404,
                   other_method
                       ? req.method + " is not served at " + http_parts::printable(req.path)
                       : "nothing is served at " + http_parts::printable(req.path));
  }
  if ((*route)->admit && !(*route)->admit(req, refused)) return refused;
  return std::nullopt;
}

// The body's framing against the route's bound: the answer when the body is refused, or
// nullopt with the parser's body limit set to the route's bound.
std::optional<HttpResponse> decide_framing(const HttpServer::Impl& s, Parser& parser,
                                           const HttpRequest& req, const HttpServer::Route& route) {
  const std::size_t bound = route.large_body ? s.limits.max_body : s.limits.small_body;
  const std::string encoding = req.header("Content-Encoding");
  if (!encoding.empty() && !beast::iequals(encoding, "identity")) {
    return failure(415, "Content-Encoding " + http_parts::printable(encoding) +
                            ": poold decompresses nothing; send the body as it is");
  }
  const auto length = parser.content_length();
  if (length && *length > bound) {
    return failure(413, "the body (" + std::to_string(*length) + " bytes) exceeds " +
                            std::to_string(bound) + " bytes, the most " +
                            http_parts::printable(req.path) + " takes" +
                            (route.large_body ? " (service.http.max_body)" : ""));
  }
  if (!parser.is_done()) parser.body_limit(bound);
  return std::nullopt;
}

HttpResponse body_too_large(const HttpServer::Impl& s, const HttpRequest& req,
                            const HttpServer::Route& route) {
  return failure(413,
                 "the body exceeds " +
                     std::to_string(route.large_body ? s.limits.max_body : s.limits.small_body) +
                     " bytes, the most " + http_parts::printable(req.path) + " takes");
}

// Moves the read body into `req` and adds a form's fields to its params: the answer when a
// field is not UTF-8, else nullopt.
std::optional<HttpResponse> take_body(Parser& parser, HttpRequest& req) {
  req.body = std::move(parser.get().body());
  const std::string type = req.header("Content-Type");
  if (type.rfind("application/x-www-form-urlencoded", 0) == 0) {
    if (auto bad = parse_query(req.body, &req.params)) {
      return failure(400, "form field '" + http_parts::printable(*bad) + "' is not UTF-8 text");
    }
  }
  return std::nullopt;
}

// Runs the route's handler; what it throws becomes a 500 (logged with the route).
HttpResponse run_handler(const HttpServer::Route& route, const HttpRequest& req) {
  HttpResponse res;
  try {
    route.handler(req, res);
    return res;
  } catch (const std::exception& e) {
    spdlog::error("http: {} {} failed: {}", req.method, http_parts::printable(req.path), e.what());
  } catch (...) {
    spdlog::error("http: {} {} failed", req.method, http_parts::printable(req.path));
  }
  HttpResponse failed;
  http_parts::error_answer(failed, 500, "the request failed inside poold (logged)");
  return failed;
}

// The sink a stream's thread writes through: each write is handed to the I/O thread and
// waited for (the connection's write timeout bounds it; stop() ends the wait).
class ConnectionSink final : public StreamSink {
 public:
  ConnectionSink(HttpServer::Impl& server, std::shared_ptr<Connection> conn)
      : server_(server), conn_(std::move(conn)) {}

  bool write(std::string_view chunk) override {
    if (chunk.empty()) return !failed();
    auto data = std::make_shared<std::string>(chunk);
    auto state = state_;
    {
      std::lock_guard lock(state->mu);
      if (state->failed || server_.stopping) return false;
      state->pending = true;
    }
    net::post(server_.ioc, [conn = conn_, data, state] {
      conn->write_chunk(data, [state](bool ok) {
        std::lock_guard lock(state->mu);
        state->pending = false;
        if (!ok) state->failed = true;
        state->cv.notify_all();
      });
    });
    // The write's own deadline (write_timeout) ends it; the checks of `stopping` here let
    // stop() end the wait when the loop will never run the write.
    std::unique_lock lock(state->mu);
    const auto give_up =
        std::chrono::steady_clock::now() + server_.limits.write_timeout + std::chrono::seconds(5);
    while (state->pending && !server_.stopping.load() &&
           std::chrono::steady_clock::now() < give_up) {
      state->cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (state->pending) state->failed = true;
    return !state->failed;
  }

  bool stopping() const override { return server_.stopping.load(); }

  bool wait(std::chrono::milliseconds d) override {
    std::unique_lock lock(server_.stream_mu);
    server_.stream_cv.wait_for(lock, d, [this] { return server_.stopping.load(); });
    return !server_.stopping.load() && !failed();
  }

 private:
  bool failed() const {
    std::lock_guard lock(state_->mu);
    return state_->failed;
  }
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false;
    bool failed = false;
  };
  HttpServer::Impl& server_;
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace

void Connection::read_header() {
  state = State::kWaiting;
  route = nullptr;
  body_unread = false;
  request = HttpRequest{};
  request.peer = client;
  parser.emplace();
  parser->header_limit(static_cast<std::uint32_t>(server.limits.max_header_bytes));
  // The largest body any route takes; the route's own bound is checked once it is known.
  parser->body_limit(server.limits.max_body);
  stream.expires_after(first ? server.limits.header_timeout : server.limits.idle_timeout);
  bhttp::async_read_header(
      stream, buffer, *parser,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void Connection::fail(int status, std::string message) {
  body_unread = true;  // what follows the error is not read: linger, then close
  respond(failure(status, message));
}

void Connection::on_header(beast::error_code ec) {
  if (state == State::kClosed) return;
  if (ec) {
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      return fail(431, "the request line and headers exceed service.http.max_header_bytes (" +
                           std::to_string(server.limits.max_header_bytes) + " bytes)");
    }
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return close();
    }
    return fail(400, std::string("malformed request: ") + ec.message());
  }
  state = State::kBusy;
  body_unread = !parser->is_done();
  if (auto answer = decide_head(server, *parser, request, &route)) {
    return respond(std::move(*answer));
  }
  read_body();
}

void Connection::read_body() {
  const auto& head = parser->get();
  if (auto answer = decide_framing(server, *parser, request, *route)) {
    body_unread = true;
    return respond(std::move(*answer));
  }
  if (parser->is_done()) return dispatch();
  const auto expect = head[bhttp::field::expect];
  auto go = [self = shared_from_this()] {
    self->stream.expires_after(self->server.limits.body_timeout);
    bhttp::async_read(self->stream, self->buffer, *self->parser,
                      [self](beast::error_code ec, std::size_t) { self->on_body(ec); });
  };
  if (beast::iequals(expect, "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    stream.expires_after(server.limits.write_timeout);
    net::async_write(stream, net::buffer(kContinue),
                     [self = shared_from_this(), go](beast::error_code ec, std::size_t) {
                       if (self->state == State::kClosed) return;
                       if (ec) return self->close();
                       go();
                     });
    return;
  }
  go();
}

void Connection::on_body(beast::error_code ec) {
  if (state == State::kClosed) return;
  if (ec) {
    if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow) {
      body_unread = true;
      return respond(body_too_large(server, request, *route));
    }
    if (ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == bhttp::error::end_of_stream || ec == net::error::eof) {
      return close();
    }
    return fail(400, std::string("malformed body: ") + ec.message());
  }
  body_unread = false;
  dispatch();
}

void Connection::dispatch() {
  body_unread = false;
  if (auto answer = take_body(*parser, request)) return respond(std::move(*answer));
  stream.expires_never();  // the handler's own deadlines bound it; the write has its own
  auto self = shared_from_this();
  const bool taken = server.lane(route->lane).post([self]() -> std::function<void()> {
    auto res = std::make_shared<HttpResponse>(run_handler(*self->route, self->request));
    return [self, res] {
      net::post(self->server.ioc, [self, res] { self->respond(std::move(*res)); });
    };
  });
  if (!taken) {
    HttpResponse res;
    http_parts::error_answer(res, 503,
                             "every serving thread is busy and service.http.queued_requests "
                             "requests wait: try again");
    res.set_header("Retry-After", "1");
    respond(std::move(res));
  }
}

void Connection::respond(HttpResponse res) {
  if (state == State::kClosed) return;
  if (res.stream) return begin_stream(std::move(res));
  add_default_headers(res);
  const bool keep_alive =
      !res.close && !body_unread && parser && parser->keep_alive() && !server.stopping.load();
  out = std::make_shared<bhttp::response<bhttp::string_body>>();
  out->version(11);
  out->result(static_cast<unsigned>(res.status));
  for (auto& [name, value] : res.headers) out->insert(name, value);
  out->body() = std::move(res.body);
  out->keep_alive(keep_alive);
  out->prepare_payload();
  stream.expires_after(server.limits.write_timeout);
  bhttp::async_write(stream, *out,
                     [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                       self->on_written(ec, keep_alive);
                     });
}

void Connection::on_written(beast::error_code ec, bool keep_alive) {
  if (state == State::kClosed) return;
  out.reset();
  if (ec) return close();
  if (!keep_alive) return body_unread ? linger_close() : close();
  first = false;
  read_header();
}

// The client may still be sending the body we did not read: closing now would answer its
// next packet with a reset, which can destroy our answer before it is read. Read and drop
// up to 1 MiB for up to a second first (nginx's lingering close).
void Connection::linger_close() {
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  state = State::kWaiting;  // evictable: it serves no one
  stream.expires_after(std::chrono::seconds(1));
  linger_read(std::make_shared<std::array<char, 16384>>(), std::size_t{1} << 20);
}

// Each read's handler owns the connection and the sink, and nothing owns the handler but the
// pending read: a connection closed meanwhile (evicted at the cap, or by stop()) is freed
// when its aborted read completes or is destroyed with the loop. (A self-referencing drain
// function kept itself, the connection and its 16 KiB alive when the close came first.)
void Connection::linger_read(std::shared_ptr<std::array<char, 16384>> sink, std::size_t budget) {
  auto* buffer = sink.get();
  stream.async_read_some(net::buffer(*buffer),
                         [self = shared_from_this(), sink = std::move(sink), budget](
                             beast::error_code ec, std::size_t n) mutable {
                           if (self->state == State::kClosed) return;
                           if (ec || n >= budget) return self->close();
                           self->linger_read(std::move(sink), budget - n);
                         });
}

void Connection::close() {
  if (state == State::kClosed) return;
  state = State::kClosed;
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.close();
  server.forget(*this);
}

void Connection::begin_stream(HttpResponse res) {
  add_default_headers(res);
  stream_head = std::make_shared<bhttp::response<bhttp::empty_body>>();
  stream_head->version(11);
  stream_head->result(static_cast<unsigned>(res.status));
  for (auto& [name, value] : res.headers) stream_head->insert(name, value);
  stream_head->keep_alive(false);
  stream_head->chunked(true);
  stream_sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*stream_head);
  state = State::kStreaming;
  stream.expires_after(server.limits.write_timeout);
  auto fn = std::move(res.stream);
  bhttp::async_write_header(
      stream, *stream_sr,
      [self = shared_from_this(), fn = std::move(fn)](beast::error_code ec, std::size_t) mutable {
        if (self->state == State::kClosed) return;
        if (ec) return self->close();
        self->stream.expires_never();
        if (!self->server.start_stream(self, std::move(fn))) self->close();
      });
}

void Connection::write_chunk(std::shared_ptr<std::string> chunk, std::function<void(bool)> done) {
  if (state != State::kStreaming) return done(false);
  char size[32];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", chunk->size());
  auto framed = std::make_shared<std::string>(size, static_cast<std::size_t>(n));
  if (chunk->empty()) {
    *framed = "0\r\n\r\n";  // the last chunk
  } else {
    *framed += *chunk;
    *framed += "\r\n";
  }
  stream.expires_after(server.limits.write_timeout);
  net::async_write(stream, net::buffer(*framed),
                   [self = shared_from_this(), framed, done = std::move(done)](beast::error_code ec,
                                                                               std::size_t) {
                     self->stream.expires_never();
                     if (ec) self->close();
                     done(!ec);
                   });
}

// ---------------------------------------------------------------------------------------

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

bool HttpServer::Impl::start_stream(const std::shared_ptr<Connection>& conn,
                                    std::function<void(StreamSink&)> fn) {
  std::lock_guard lock(stream_mu);
  if (stopping.load() || active_streams >= limits.max_streams) return false;
  join_finished_streams();
  ++active_streams;
  auto done = std::make_shared<std::atomic<bool>>(false);
  streams.push_back({std::thread([this, conn, fn = std::move(fn), done] {
                       name_thread(::pthread_self(), "sp-http-stream");
                       {
                         ConnectionSink sink(*this, conn);
                         try {
                           fn(sink);
                         } catch (const std::exception& e) {
                           spdlog::error("http: an event stream failed: {}", e.what());
                         }
                         (void)sink.write(std::string_view());
                       }
                       // The last chunk, then the connection ends (streams never keep alive).
                       net::post(ioc, [conn] {
                         conn->write_chunk(std::make_shared<std::string>(),
                                           [conn](bool) { conn->close(); });
                       });
                       std::lock_guard l(stream_mu);
                       --active_streams;
                       done->store(true);
                     }),
                     done});
  return true;
}

void HttpServer::Impl::join_finished_streams() {
  for (auto it = streams.begin(); it != streams.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = streams.erase(it);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------------------

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
    std::lock_guard lock(s.stream_mu);
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
    std::lock_guard lock(s.stream_mu);
    streams.swap(s.streams);
  }
  for (auto& t : streams) t.thread.join();
  s.ioc.stop();
  if (s.io_thread.joinable()) s.io_thread.join();
  // The loop no longer runs: what it did not close is closed here, on this thread.
  close_all();
}

namespace {
HttpResponse answer_one(const HttpServer::Impl& s, std::string_view raw);
}  // namespace

HttpResponse HttpServer::serve_one(std::string_view raw) {
  HttpResponse res = answer_one(*impl_, raw);
  if (res.status != 0) add_default_headers(res);  // as Connection::respond does
  return res;
}

namespace {

HttpResponse answer_one(const HttpServer::Impl& s, std::string_view raw) {
  using Route = HttpServer::Route;
  Parser parser;
  parser.header_limit(static_cast<std::uint32_t>(s.limits.max_header_bytes));
  parser.body_limit(s.limits.max_body);
  parser.eager(false);  // the header alone first, as a connection reads it
  beast::error_code ec;
  std::size_t used = parser.put(net::buffer(raw.data(), raw.size()), ec);
  if (ec == bhttp::error::header_limit) {
    return failure(431, "the request line and headers exceed service.http.max_header_bytes");
  }
  if (ec == bhttp::error::need_more) return HttpResponse{0, {}, {}, {}, true};
  if (ec) return failure(400, std::string("malformed request: ") + ec.message());
  HttpRequest req;
  req.peer = "127.0.0.1";
  const Route* route = nullptr;
  if (auto answer = decide_head(s, parser, req, &route)) return std::move(*answer);
  if (auto answer = decide_framing(s, parser, req, *route)) return std::move(*answer);
  parser.eager(true);
  while (!parser.is_done()) {
    raw.remove_prefix(used);
    if (raw.empty()) return HttpResponse{0, {}, {}, {}, true};
    used = parser.put(net::buffer(raw.data(), raw.size()), ec);
    if (ec == bhttp::error::body_limit) return body_too_large(s, req, *route);
    if (ec == bhttp::error::need_more) return HttpResponse{0, {}, {}, {}, true};
    if (ec) return failure(400, std::string("malformed body: ") + ec.message());
    if (used == 0) return HttpResponse{0, {}, {}, {}, true};
  }
  if (auto answer = take_body(parser, req)) return std::move(*answer);
  return run_handler(*route, req);
}

}  // namespace

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
