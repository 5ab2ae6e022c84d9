// The JSON API under /api/v1/ (docs/protocol.md, "HTTP API"): every operation of the
// control protocol (ops::kOps), dispatched through the same ControlHandler as the socket
// server, so an operation defined once is served here with the same arguments, replies,
// rights and errors. `GET|POST /api/v1/<op>` runs any operation by its name (GET: reads
// only, the arguments from the query); a few resource paths (`/api/v1/pools/{pool}/tasks`,
// `/api/v1/tasks/{id}`, ...) name an operation and fill some of its arguments from the path.
// `events` is a Server-Sent Events stream.
//
// Thread-safety: the routes run on httplib's serving threads; call() from any thread.
// Lifetime: the handler and access must outlive the Api; stop() before the handler goes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sandpool/control.hpp>

#include "http/http_access.hpp"
#include "http/local_call.hpp"

namespace sandpool::http {

struct ApiOptions {
  // Open `events` streams at most (each holds a serving thread); over it: 503 busy.
  std::size_t max_streams = 8;
  // A stream with nothing to send writes an SSE comment this often (finds closed clients).
  std::chrono::milliseconds heartbeat{10000};
  // A stream writes the events that came every `flush` (of the hub's last 256 each time).
  std::chrono::milliseconds flush{250};
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

  void install(httplib::Server& server);
  // Ends every open stream and every call still waiting (their HTTP replies say the
  // service is closing). Idempotent.
  void stop();

  // What a request's credentials grant; nullopt when it was refused (`res` says why): a
  // token in the URL, an unknown bearer token, or a form posted with the session cookie
  // without the session's CSRF token (`changes_state`).
  std::optional<Caller> authenticate(const httplib::Request& req, httplib::Response& res,
                                     bool changes_state);
  // Runs `op` as `caller` and waits for its final reply (a refused one is an error reply
  // with code `forbidden` or `unauthorized`, not sent to the handler). `events`, when
  // given, gets the event frames sent before it (a stream that ends: events, follow=false).
  CallReply call(std::string_view op, nlohmann::json args, std::string blob, const Caller& caller,
                 std::vector<std::string>* events = nullptr);

  // The HTTP status of a wire error code (docs/protocol.md, "HTTP API").
  static int http_status(std::string_view code);
  std::size_t open_streams() const;

 private:
  void run(const httplib::Request& req, httplib::Response& res, std::string_view op_name,
           nlohmann::json args);
  void stream_events(const httplib::Request& req, httplib::Response& res, const Caller& caller,
                     nlohmann::json args);
  // Waits `d`; false when stop() came first.
  bool wait_unless_stopped(std::chrono::milliseconds d);
  // Registers a call so stop() can end it; the returned guard forgets it.
  std::shared_ptr<void> track(const std::shared_ptr<LocalCall>& call);

  ControlHandler& handler_;
  HttpAccess& access_;
  const ApiOptions options_;
  mutable std::mutex mu_;
  std::list<std::weak_ptr<LocalCall>> calls_;  // open ones
  std::condition_variable stop_cv_;            // stop() came (streams wait on it between flushes)
  std::size_t streams_ = 0;
  bool stopped_ = false;
};

// Arguments for `op` from text fields (a query string, a form): a value that reads as an
// integer or true/false is passed as one unless the operation's arguments want the text
// (a pool named "7"); the operation's typed decode decides. Keys in `skip` are left out.
nlohmann::json typed_args(std::string_view op, const httplib::Params& fields,
                          std::initializer_list<std::string_view> skip = {});

// The JSON text of `reply` as the API answers it: the reply's JSON, with its blob as
// "blob" (UTF-8 text) or "blob_base64" (other bytes).
std::string api_body(const CallReply& reply);
// Sets `res` to the error `code` (wire vocabulary) with `message`.
void api_error(httplib::Response& res, std::string_view code, std::string_view message);

}  // namespace sandpool::http
