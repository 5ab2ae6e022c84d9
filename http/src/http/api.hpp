// The JSON API under /api/v1/ (docs/protocol.md, "HTTP API"): every operation of the
// control protocol (ops::kOps), dispatched through the same ControlHandler as the socket
// server, so an operation defined once is served here with the same arguments, replies,
// rights and errors. `GET|POST /api/v1/<op>` runs any operation by its name (GET: reads
// only, the arguments from the query); a few resource paths (`/api/v1/pools/{pool}/tasks`,
// `/api/v1/tasks/{id}`, ...) name an operation and fill some of its arguments from the path.
// `events` is a Server-Sent Events stream.
//
// Each route's rights are decided from its path and the credentials before its body is
// read (admit_op), and every call waits with a deadline (docs/security.md, "The HTTP
// listener").
//
// Thread-safety: the routes run on the server's threads; call() from any thread.
// Lifetime: the handler and access must outlive the Api; stop() before the handler goes.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/control/control.hpp>

#include <sandpool/metrics/http_server.hpp>
#include "http/http_access.hpp"
#include "http/local_call.hpp"

namespace sandpool::http {

struct ApiOptions {
  // Open `events` streams at most, and of those the ones only admins may take.
  std::size_t max_streams = 8;
  std::size_t admin_reserved_streams = 2;
  // A stream with nothing to send writes an SSE comment this often (finds closed clients).
  std::chrono::milliseconds heartbeat{10000};
  // A stream writes the events that came every `flush` (of the hub's last 256 each time).
  std::chrono::milliseconds flush{250};
  // How long a call waits for its reply; `wait` at most max_wait (its default too).
  std::chrono::milliseconds call_timeout{30000};
  std::chrono::milliseconds max_wait{60000};
  std::size_t max_json_depth = 32;
  // Anonymous requests are refused (401) but for the open routes: a token is configured or
  // the listener is not loopback.
  bool deny_anonymous = false;
  // The listener's port: the session cookie's name carries it.
  std::uint16_t port = 0;
};

// Who made a request, as authenticate() found it.
struct Caller {
  Access access = Access::kAnonymous;
  std::optional<Session> session;  // when the session cookie named one
  std::string session_id;
};

class Api {
 public:
  Api(ControlHandler& handler, HttpAccess& access, ApiOptions options);
  ~Api();

  void install(HttpServer& server);
  // Ends every open stream and every call still waiting (their HTTP replies say the
  // service is closing). Idempotent.
  void stop() EXCLUDES(mu_);

  // What a request's credentials grant; nullopt when it was refused (`res` says why): a
  // token in the URL, an unknown bearer token, or, when `changes_state`, a request made
  // with the session cookie without the session's CSRF token.
  std::optional<Caller> authenticate(const HttpRequest& req, HttpResponse& res, bool changes_state);
  // Admission of a request for `op` (nullptr: a page that needs only to be allowed to
  // read), from its header: false when refused (`res` is the 400/401/403 answer).
  bool admit_op(const HttpRequest& req, HttpResponse& res, const ops::OpInfo* op);
  // Runs `op` as `caller` and waits for its final reply, at most call_timeout (a `wait`:
  // max_wait and a little), then a `timeout` error. A refused one is an error reply with
  // code `forbidden` or `unauthorized`, not sent to the handler. `events`, when given, gets
  // the event frames sent before it (a stream that ends: events, follow=false); a stream
  // operation without it is refused.
  CallReply call(std::string_view op, nlohmann::json args, std::string blob, const Caller& caller,
                 std::vector<std::string>* events = nullptr);

  // The HTTP status of a wire error code (docs/protocol.md, "HTTP API").
  static int http_status(std::string_view code);
  std::size_t open_streams() const EXCLUDES(mu_);
  // The session cookie's name on this listener: sp_session_<port>.
  const std::string& cookie_name() const { return cookie_name_; }
  bool deny_anonymous() const { return options_.deny_anonymous; }

 private:
  void run(const HttpRequest& req, HttpResponse& res, std::string_view op_name,
           nlohmann::json args);
  void stream_events(HttpResponse& res, const Caller& caller, nlohmann::json args);
  // Registers a call so stop() can end it; the returned guard forgets it.
  std::shared_ptr<void> track(const std::shared_ptr<LocalCall>& call) EXCLUDES(mu_);
  // A stream slot for `access`, released when the returned guard goes; nullptr: none free.
  std::shared_ptr<void> take_stream_slot(Access access) EXCLUDES(mu_);
  // A route for `op_name` (a fixed name, or the path's group `op_group`), its arguments from
  // the path by `args`.
  void route(HttpServer& server, const char* method, const char* pattern, bool large_body,
             std::function<std::string(const HttpRequest&)> op_name,
             std::function<nlohmann::json(const HttpRequest&)> args);

  ControlHandler& handler_;
  HttpAccess& access_;
  const ApiOptions options_;
  const std::string cookie_name_;
  // A leaf: held for these fields only, never across abandon() or the handler.
  mutable Mutex mu_;
  std::list<std::weak_ptr<LocalCall>> calls_ GUARDED_BY(mu_);  // open ones
  std::size_t streams_ GUARDED_BY(mu_) = 0;                    // open event streams
  bool stopped_ GUARDED_BY(mu_) = false;
};

// Arguments for `op` from text fields (a query string, a form): a value that reads as an
// integer or true/false is passed as one unless the operation's arguments want the text
// (a pool named "7"); the operation's typed decode decides. Keys in `skip` are left out.
nlohmann::json typed_args(std::string_view op, const HttpParams& fields,
                          std::initializer_list<std::string_view> skip = {});

// The JSON text of `reply` as the API answers it: the reply's JSON, with its blob as
// "blob" (UTF-8 text) or "blob_base64" (other bytes).
std::string api_body(const CallReply& reply);
// Sets `res` to the error `code` (wire vocabulary) with `message`.
void api_error(HttpResponse& res, std::string_view code, std::string_view message);
// JSON text that never throws: bytes that are not UTF-8 are replaced.
std::string json_text(const nlohmann::json& j);

}  // namespace sandpool::http
