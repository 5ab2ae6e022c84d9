// HttpServer's parts (http_server.hpp), private to its files: the serving threads' queue
// (WorkQueue), one connection (Connection, http_connection.cpp), the server's state
// (HttpServer::Impl, http_server.cpp), and what a request's header and body decide
// (http_requests.cpp).
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/thread_name.hpp>

#include <sandpool/metrics/http_server.hpp>

namespace sandpool::http_internal {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Parser = bhttp::request_parser<bhttp::string_body>;

inline std::string text_of(boost::string_view s) { return std::string(s.data(), s.size()); }

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
  bool post(Job job) EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      // A job waits only while every thread is busy: room for a thread each, and the queue.
      if (stopping_ || jobs_.size() + busy_ >= threads_.size() + max_queued_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  // Lets the running jobs end, drops the queued ones, joins. Idempotent.
  void stop() EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      stopping_ = true;
      jobs_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void run() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (true) {
      while (!stopping_ && jobs_.empty()) cv_.wait(mu_);
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
  Mutex mu_;
  CondVar cv_;
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  std::size_t busy_ GUARDED_BY(mu_) = 0;  // threads running a job
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

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

// What a request decides (http_requests.cpp), for a connection and for
// HttpServer::serve_one alike.
// An answer that ends the request where it stands: the connection closes after it.
HttpResponse failure(int status, std::string_view message);
// What a request's complete header decides: the answer when it stops here, or nullopt with
// `*route` chosen. Fills `req` from the header (fields, method, decoded target).
std::optional<HttpResponse> decide_head(const HttpServer::Impl& s, const Parser& parser,
                                        HttpRequest& req, const HttpServer::Route** route);
// The body's framing against the route's bound: the answer when the body is refused, or
// nullopt with the parser's body limit set to the route's bound.
std::optional<HttpResponse> decide_framing(const HttpServer::Impl& s, Parser& parser,
                                           const HttpRequest& req, const HttpServer::Route& route);
// The answer to a body over the route's bound.
HttpResponse body_too_large(const HttpServer::Impl& s, const HttpRequest& req,
                            const HttpServer::Route& route);
// Moves the read body into `req` and adds a form's fields to its params: the answer when a
// field is not UTF-8, else nullopt.
std::optional<HttpResponse> take_body(Parser& parser, HttpRequest& req);
// Runs the route's handler; what it throws becomes a 500 (logged with the route).
HttpResponse run_handler(const HttpServer::Route& route, const HttpRequest& req);
// The headers every answer carries unless its handler set its own.
void add_default_headers(HttpResponse& res);
// HttpServer::serve_one's answer to `raw`, decided as a connection decides it; status 0
// when `raw` is not a whole request.
HttpResponse answer_one(const HttpServer::Impl& s, std::string_view raw);

}  // namespace sandpool::http_internal

namespace sandpool {

struct HttpServer::Impl {
  explicit Impl(const HttpLimits& l)
      : limits(l),
        probe("sp-http-probe", 1, 32),
        metrics("sp-http-metrics", 1, 8),
        api("sp-http", l.serving_threads, l.queued_requests) {}

  http_internal::WorkQueue& lane(HttpServer::Lane l) {
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
  void admit(http_internal::tcp::socket socket);
  // Closes the connection that has waited longest for a request header (of `client`, or of
  // anyone when empty). Returns false when every connection is busy.
  bool evict_oldest_waiting(const std::string* client);
  void forget(http_internal::Connection& c);
  bool start_stream(const std::shared_ptr<http_internal::Connection>& conn,
                    std::function<void(StreamSink&)> fn) EXCLUDES(stream_mu);
  // Joins the stream threads that are done (each set `done` as its last step under
  // stream_mu, so the join waits for nothing but the thread's return).
  void join_finished_streams() REQUIRES(stream_mu);

  HttpLimits limits;
  http_internal::net::io_context ioc{1};
  http_internal::tcp::acceptor acceptor{ioc};
  http_internal::net::steady_timer accept_retry{ioc};
  std::string host;
  std::uint16_t port = 0;
  std::vector<HttpServer::Route> routes;
  HttpServer::Admit gate;
  http_internal::WorkQueue probe, metrics, api;
  std::thread io_thread;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> open{0};

  // The I/O thread's own: every open connection, oldest first, and the count per client.
  std::list<std::shared_ptr<http_internal::Connection>> connections;
  std::unordered_map<std::string, std::size_t> per_client;

  // Event streams, each on a thread of its own.
  Mutex stream_mu;
  CondVar stream_cv;  // notified when stop() begins
  struct StreamThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<StreamThread> streams GUARDED_BY(stream_mu);
  std::size_t active_streams GUARDED_BY(stream_mu) = 0;
};

}  // namespace sandpool
