// One HTTP connection (http_server_impl.hpp's Connection), on the server's I/O thread: its
// header and body read under their deadlines, its request served on a lane, its answer
// written, lingering closes; and event streams, each written through a ConnectionSink by a
// thread of its own, started here (HttpServer::Impl::start_stream).
#include <atomic>
#include <chrono>
#include <exception>
#include <string>

#include <spdlog/spdlog.h>

#include <sandpool/metrics/http_parts.hpp>
#include "metrics/http_server_impl.hpp"

namespace sandpool::http_internal {
namespace {

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
      MutexLock lock(state->mu);
      if (state->failed || server_.stopping) return false;
      state->pending = true;
    }
    net::post(server_.ioc, [conn = conn_, data, state] {
      conn->write_chunk(data, [state](bool ok) {
        MutexLock lock(state->mu);
        state->pending = false;
        if (!ok) state->failed = true;
        state->cv.notify_all();
      });
    });
    // The write's own deadline (write_timeout) ends it; the checks of `stopping` here let
    // stop() end the wait when the loop will never run the write.
    MutexLock lock(state->mu);
    const auto give_up =
        std::chrono::steady_clock::now() + server_.limits.write_timeout + std::chrono::seconds(5);
    while (state->pending && !server_.stopping.load()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= give_up) break;
      state->cv.wait_until(state->mu, std::min(give_up, now + std::chrono::milliseconds(100)));
    }
    if (state->pending) state->failed = true;
    return !state->failed;
  }

  bool stopping() const override { return server_.stopping.load(); }

  bool wait(std::chrono::milliseconds d) override {
    const auto until = std::chrono::steady_clock::now() + d;
    {
      MutexLock lock(server_.stream_mu);
      while (!server_.stopping.load() &&
             server_.stream_cv.wait_until(server_.stream_mu, until) != std::cv_status::timeout) {
      }
    }
    return !server_.stopping.load() && !failed();
  }

 private:
  bool failed() const {
    MutexLock lock(state_->mu);
    return state_->failed;
  }
  struct State {
    Mutex mu;
    CondVar cv;
    bool pending GUARDED_BY(mu) = false;
    bool failed GUARDED_BY(mu) = false;
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

}  // namespace sandpool::http_internal

namespace sandpool {

// Event streams: each on a thread of its own, writing through a ConnectionSink.
bool HttpServer::Impl::start_stream(const std::shared_ptr<http_internal::Connection>& conn,
                                    std::function<void(StreamSink&)> fn) {
  MutexLock lock(stream_mu);
  if (stopping.load() || active_streams >= limits.max_streams) return false;
  join_finished_streams();
  ++active_streams;
  auto done = std::make_shared<std::atomic<bool>>(false);
  streams.push_back({std::thread([this, conn, fn = std::move(fn), done] {
                       name_thread(::pthread_self(), "sp-http-stream");
                       {
                         http_internal::ConnectionSink sink(*this, conn);
                         try {
                           fn(sink);
                         } catch (const std::exception& e) {
                           spdlog::error("http: an event stream failed: {}", e.what());
                         }
                         (void)sink.write(std::string_view());
                       }
                       // The last chunk, then the connection ends (streams never keep alive).
                       http_internal::net::post(ioc, [conn] {
                         conn->write_chunk(std::make_shared<std::string>(),
                                           [conn](bool) { conn->close(); });
                       });
                       MutexLock l(stream_mu);
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

}  // namespace sandpool
