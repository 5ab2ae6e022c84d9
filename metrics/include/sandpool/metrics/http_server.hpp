// The HTTP server poold's listener and the MetricsServer share (docs/security.md, "The HTTP
// listener"): Boost.Beast on one I/O thread that holds every connection without a thread
// each, and bounded lanes of serving threads that run the routes' handlers. Everything a
// request carries is bounded before it is parsed, and a route's admission (its rights) is
// decided from the header, before the body is read:
//
//   accept (connection caps; the oldest idle connection makes room)
//   -> header (byte and field limits, within a deadline; path and query percent-decoded
//      and UTF-8) -> the gate (Host, Origin, default-deny) -> the route's own admit
//   -> body (the route's limit, chunked counted as it comes; no Content-Encoding)
//   -> the route's lane (bounded queue; full: 503) -> the response, within a deadline.
//
// A handler may answer with a stream (Server-Sent Events): it then runs on a thread of its
// own, outside the lanes, writing chunks through a StreamSink until it returns.
//
// Thread-safety: add routes and the gate before start(); port(), address(), stop() from
// any thread but the server's own. Handlers run on lane threads, several at once.
// Lifetime: ~HttpServer() stops it; stop() returns when no handler or stream runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>

namespace sandpool {

// What one listener bounds (service.http.*, docs/configuration.md). The defaults are the
// documented ones.
struct HttpLimits {
  using Duration = std::chrono::milliseconds;
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_client = 256;
  int backlog = 128;
  std::size_t max_header_bytes = 16u << 10;
  std::size_t max_headers = 64;
  std::size_t max_body = 16u << 20;    // routes that carry a payload
  std::size_t small_body = 64u << 10;  // every other route
  Duration idle_timeout{5000};
  Duration header_timeout{10000};
  Duration body_timeout{30000};
  Duration write_timeout{30000};
  std::size_t serving_threads = 16;
  std::size_t queued_requests = 64;
  std::size_t max_streams = 8;  // a backstop; the API counts its streams per right
  bool operator==(const HttpLimits&) const = default;
};

// Header names compare without case (RFC 9110).
struct HeaderLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};
using HttpHeaders = std::multimap<std::string, std::string, HeaderLess>;
using HttpParams = std::multimap<std::string, std::string, std::less<>>;

// One request, as the server read and checked it: every text here is UTF-8.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query, percent-encoded
  std::string path;    // percent-decoded
  HttpParams query;    // the URL's query, decoded
  HttpParams params;   // the query and, for a form body, its fields (httplib's meaning)
  HttpHeaders headers;
  std::string body;                  // empty until the body is read (not in admit)
  std::vector<std::string> matches;  // the route pattern's groups over `path`; [0] the whole
  std::string peer;                  // the client's address, as text

  // The header's first value, or "".
  std::string header(std::string_view name) const;
  bool has_param(std::string_view name) const { return params.count(name) != 0; }
  // The `i`th value of field `name`, or "".
  std::string param(std::string_view name, std::size_t i = 0) const;
  std::size_t param_count(std::string_view name) const { return params.count(name); }
};

// Writes an event stream's chunks; each write waits until the client has taken it or
// write_timeout passed.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // False once the client is gone, a write timed out, or the server is stopping: return.
  virtual bool write(std::string_view chunk) = 0;
  // True once the server is stopping.
  virtual bool stopping() const = 0;
  // Waits up to `d`; false when the server began stopping (or the client left) first.
  virtual bool wait(std::chrono::milliseconds d) = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // Set: the body is this stream (chunked), run on a thread of its own; `body` is unused.
  std::function<void(StreamSink&)> stream;
  // Set by an admit or gate refusal: the connection closes after this answer.
  bool close = false;

  void set_header(std::string_view name, std::string value);
  void set_content(std::string content, std::string_view content_type);
};

class HttpServer {
 public:
  // Where a route's handler runs: lanes do not wait for each other.
  enum class Lane { kProbe, kMetrics, kApi };
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Runs on the I/O thread with the header only (no body): true lets the request through;
  // false answers with `res` (the connection then closes, its body unread). Must not block.
  using Admit = std::function<bool(const HttpRequest&, HttpResponse&)>;

  struct Route {
    std::string method;  // "GET" (also serves HEAD) or "POST"
    std::regex path;     // over the whole decoded path
    Lane lane = Lane::kApi;
    bool large_body = false;  // the body may reach max_body (else small_body)
    Admit admit;              // may be empty
    Handler handler;
  };

  // Binds `listen` ("host:port", "[v6]:port"; port 0 picks one). Errors name `what` (the
  // config key): kInvalidArgument for a malformed address, kSystem when it cannot be bound.
  static Result<std::unique_ptr<HttpServer>> bind(std::string_view listen, HttpLimits limits,
                                                  std::string_view what);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before start(). Routes are tried in the order added.
  void add(Route route);
  void get(std::string path, Lane lane, Handler handler);
  // Before start(): every request, before its route's admit (Host and Origin checks).
  void set_gate(Admit gate);

  void start(const char* thread_name);
  // Stops accepting, ends streams and connections, waits for every handler. Idempotent.
  void stop();

  std::uint16_t port() const;
  const std::string& host() const;
  std::string address() const;  // "host:port" as bound ([v6]:port)
  const HttpLimits& limits() const;

  // Connections open now (tests and the bench).
  std::size_t open_connections() const;

  // Serves `raw` (one request's bytes, as a client would send them) without a socket, with
  // every check a connection makes, its handler run on the calling thread: the fuzzer's and
  // the tests' way in. A stream's answer is returned unstarted. Status 0: the bytes end
  // before the request does (a connection would wait for more).
  HttpResponse serve_one(std::string_view raw);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "%41" -> "A"; nullopt when an escape is malformed. `plus_is_space` for query and form text.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
// True iff `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view s);
// Parses "a=1&b=2" into `out`. Returns the name of a field that is not UTF-8 or not
// decodable, or nullopt when all were.
std::optional<std::string> parse_query(std::string_view text, HttpParams* out);

// GET /metrics (`metrics`' text) and GET /healthz (200 "ok", or 503 with `health`'s reason),
// each on a lane of its own.
void add_metrics_routes(HttpServer& server, std::function<std::string()> metrics,
                        std::function<std::optional<std::string>()> health,
                        HttpServer::Admit metrics_admit = {});

}  // namespace sandpool
