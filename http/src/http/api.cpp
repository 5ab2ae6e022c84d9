#include "http/api.hpp"

#include <algorithm>
#include <utility>

#include <sandpool/control/control_ops.hpp>
#include <sandpool/store/dead_letter_file.hpp>

#include <sandpool/control/frame_codec.hpp>
#include <sandpool/control/op_json.hpp>

namespace sandpool::http {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
using Clock = LocalCall::Clock;

// True iff `op`'s arguments decode from `args` (the typed definitions' own mapping).
bool args_decode(std::string_view op, const json& args) {
  bool ok = false;
  ops::for_each_op(ops::AllOps{}, [&]<class Op>() {
    if (Op::kName != op) return;
    typename Op::Args a;
    ok = static_cast<bool>(ops::decode(args, &a));
  });
  return ok;
}

std::string cookie_value(const HttpRequest& req, std::string_view name) {
  const std::string header = req.header("Cookie");
  std::string_view rest = header;
  while (!rest.empty()) {
    const std::size_t semi = rest.find(';');
    std::string_view part = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const std::size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) {
      return std::string(part.substr(eq + 1));
    }
  }
  return {};
}

// The operation an /api/v1/<name> path names: its row of ops::kOps (kill-worker is
// kill_worker).
const ops::OpInfo* op_named(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return ops::find_op(name);
}

std::uint64_t id_of(const std::string& digits) {
  // The routes take 1 to 19 digits: below 10^19, inside uint64.
  return std::stoull(digits);
}

}  // namespace

std::string json_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json typed_args(std::string_view op, const HttpParams& fields,
                std::initializer_list<std::string_view> skip) {
  json typed = json::object(), text = json::object();
  for (const auto& [key, value] : fields) {
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    text[key] = value;
    if (value == "true" || value == "false") {
      typed[key] = value == "true";
      continue;
    }
    const bool integer = !value.empty() && value.size() < 19 &&
                         std::all_of(value.begin() + (value[0] == '-' ? 1 : 0), value.end(),
                                     [](char c) { return c >= '0' && c <= '9'; }) &&
                         value != "-";
    if (integer) {
      typed[key] = std::stoll(value);
    } else {
      typed[key] = value;
    }
  }
  if (args_decode(op, typed) || !args_decode(op, text)) return typed;
  return text;
}

Api::Api(ControlHandler& handler, HttpAccess& access, ApiOptions options)
    : handler_(handler),
      access_(access),
      options_(options),
      cookie_name_("sp_session_" + std::to_string(options.port)) {}

Api::~Api() { stop(); }

int Api::http_status(std::string_view code) {
  if (code == "bad_request" || code == "invalid_argument") return 400;
  if (code == "unauthorized") return 401;
  if (code == "forbidden") return 403;
  if (code == "not_found" || code == "unknown_op") return 404;
  if (code == "conflict" || code == "cancelled") return 409;
  if (code == "too_large") return 413;
  if (code == "busy") return 429;
  if (code == "queue_full" || code == "unavailable" || code == "closed") return 503;
  if (code == "timeout") return 504;
  return 500;
}

void api_error(HttpResponse& res, std::string_view code, std::string_view message) {
  res.status = Api::http_status(code);
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(json_text(json{{"error", code}, {"message", message}}), kJson);
}

std::string api_body(const CallReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  if (!body.is_object()) body = json::object();
  if (!reply.ok) {
    return json_text(json{{"error", reply.code}, {"message", body.value("message", "")}});
  }
  if (!reply.blob.empty()) {
    if (valid_utf8(reply.blob)) {
      body["blob"] = reply.blob;
    } else {
      body["blob_base64"] = dead_letter_file::encode_base64(reply.blob);
    }
  }
  return json_text(body);
}

std::size_t Api::open_streams() const {
  MutexLock lock(mu_);
  return streams_;
}

void Api::stop() {
  std::list<std::weak_ptr<LocalCall>> calls;
  {
    MutexLock lock(mu_);
    stopped_ = true;
    calls.swap(calls_);
  }
  for (auto& weak : calls) {
    if (auto c = weak.lock()) c->abandon();
  }
}

std::shared_ptr<void> Api::track(const std::shared_ptr<LocalCall>& call) {
  std::list<std::weak_ptr<LocalCall>>::iterator it;
  bool stopped = false;
  {
    MutexLock lock(mu_);
    stopped = stopped_;
    if (!stopped) it = calls_.insert(calls_.end(), call);
  }
  // Abandoned without mu_, as stop() does: abandon() takes the call's lock, the Responder's
  // and runs the stream's on_cancel (the event hub's lock), none of which may nest in mu_.
  if (stopped) {
    call->abandon();
    return nullptr;
  }
  return std::shared_ptr<void>(nullptr, [this, it](void*) {
    MutexLock lock(mu_);
    if (!stopped_) calls_.erase(it);
  });
}

std::shared_ptr<void> Api::take_stream_slot(Access access) {
  MutexLock lock(mu_);
  const std::size_t cap =
      access == Access::kAdmin
          ? options_.max_streams
          : options_.max_streams - std::min(options_.max_streams, options_.admin_reserved_streams);
  if (stopped_ || streams_ >= cap) return nullptr;
  ++streams_;
  // Not null (it is tested as the slot): the pointer is only a token, never read.
  return std::shared_ptr<void>(static_cast<void*>(this), [this](void*) {
    MutexLock l(mu_);
    --streams_;
  });
}

std::optional<Caller> Api::authenticate(const HttpRequest& req, HttpResponse& res,
                                        bool changes_state) {
  // A query parameter named like a token (token, access_token, ...): the URL's query only,
  // since req.params also holds a form's fields.
  for (const auto& [key, value] : req.query) {
    if (key.find("token") == std::string::npos) continue;
    api_error(res, "bad_request",
              "a token is never taken from a URL (it would stay in logs and history): send "
              "it in an Authorization: Bearer header");
    return std::nullopt;
  }
  Caller caller;
  const std::string auth = req.header("Authorization");
  if (!auth.empty()) {
    constexpr std::string_view kBearer = "Bearer ";
    const auto access = auth.rfind(kBearer, 0) == 0
                            ? access_.check_token(std::string_view(auth).substr(kBearer.size()))
                            : std::nullopt;
    if (!access) {
      api_error(res, "unauthorized", "the Authorization header holds no token of this service");
      return std::nullopt;
    }
    caller.access = *access;
    return caller;
  }
  const std::string id = cookie_value(req, cookie_name_);
  if (id.empty()) return caller;
  caller.session = access_.session(id);
  if (!caller.session) return caller;  // expired: anonymous (the page offers the login)
  caller.session_id = id;
  caller.access = caller.session->access;
  if (changes_state) {
    std::string sent = req.header("X-CSRF-Token");
    if (sent.empty()) sent = req.param("csrf");
    if (!same_secret(sent, caller.session->csrf)) {
      api_error(res, "forbidden",
                "a request made with the session cookie must carry the session's CSRF token "
                "(X-CSRF-Token header or csrf form field)");
      return std::nullopt;
    }
  }
  return caller;
}

bool Api::admit_op(const HttpRequest& req, HttpResponse& res, const ops::OpInfo* op) {
  // The CSRF token may be a form field, in the body not read yet: checked by the handler.
  auto caller = authenticate(req, res, false);
  if (!caller) return false;
  if (caller->access == Access::kAnonymous && options_.deny_anonymous) {
    api_error(res, "unauthorized",
              "this listener serves no anonymous request (a token is configured, or it is not "
              "loopback): send the read or admin token in an Authorization: Bearer header");
    return false;
  }
  if (op == nullptr) return true;
  if (!grant_for(*op, caller->access).allowed) {
    const CallReply refused = call(op->name, json::object(), {}, *caller);
    res.status = http_status(refused.code);
    if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(api_body(refused), kJson);
    return false;
  }
  return true;
}

CallReply Api::call(std::string_view op_name, json args, std::string blob, const Caller& caller,
                    std::vector<std::string>* events) {
  const ops::OpInfo* op = ops::find_op(op_name);
  if (op == nullptr) {
    return {false,
            "unknown_op",
            json_text(json{{"message", "no operation " + std::string(op_name)}}),
            {}};
  }
  const Grant grant = grant_for(*op, caller.access);
  if (!grant.allowed) {
    std::string why;
    if (op->rights == Rights::kAdmin && !is_read(*op) && !access_.has_admin_token()) {
      why = std::string(op->name) +
            " changes the service, and no service.http.admin_token_file is configured: over "
            "HTTP poold is read-only (use poolctl on the socket)";
    } else {
      why = std::string(op->name) + " needs the " + (is_read(*op) ? "read or admin" : "admin") +
            " token; this request has " +
            (caller.access == Access::kAnonymous
                 ? std::string("none")
                 : "the " + std::string(to_string(caller.access)) + " one");
    }
    const bool anonymous = caller.access == Access::kAnonymous;
    return {false, anonymous ? "unauthorized" : "forbidden", json_text(json{{"message", why}}), {}};
  }
  const auto follow = args.is_object() ? args.find("follow") : args.end();
  const bool follows =
      !args.is_object() || follow == args.end() || !follow->is_boolean() || follow->get<bool>();
  if (op->stream && (events == nullptr || follows)) {
    return {false,
            "bad_request",
            json_text(json{{"message", std::string(op->name) +
                                           " is a stream: GET /api/v1/events (Server-Sent "
                                           "Events)"}}),
            {}};
  }
  auto bound = options_.call_timeout;
  if (op->name == ops::Wait::kName) {
    // `wait` answers by itself at its timeout: at most max_wait over HTTP, and that when
    // none is given.
    if (!args.is_object()) args = json::object();
    const auto asked = args.find("timeout_ms");
    if (asked == args.end()) {
      args["timeout_ms"] = options_.max_wait.count();
    } else if (std::chrono::milliseconds ms{};
               ops::read_value(*asked, &ms) && ms > options_.max_wait) {
      // A valid duration is capped; one that is not (over a year, negative) is left for the
      // operation's decode to refuse (400) rather than turned into max_wait.
      *asked = options_.max_wait.count();
    }
    bound = options_.max_wait + options_.call_timeout;
  } else if (args.is_object() && args.contains("wait") && args["wait"] == true) {
    bound = options_.max_wait + options_.call_timeout;  // a submit that waits for its task
  }
  auto local = LocalCall::start(handler_, std::string(op_name), std::move(args), std::move(blob),
                                grant.rights);
  const auto guard = track(local);
  const auto deadline = Clock::now() + bound;
  std::optional<CallReply> final;
  if (events == nullptr) {
    final = local->wait_final(deadline);
  } else {
    while (!final && Clock::now() < deadline) {
      for (std::string& e : local->next_events(deadline, &final)) events->push_back(std::move(e));
    }
  }
  if (!final) {
    local->abandon();
    return {false,
            "timeout",
            json_text(json{{"message", std::string(op->name) + " had no reply within " +
                                           std::to_string(bound.count()) +
                                           " ms (service.http.call_timeout)"}}),
            {}};
  }
  return *final;
}

void Api::run(const HttpRequest& req, HttpResponse& res, std::string_view op_name, json args) {
  const ops::OpInfo* op = op_named(std::string(op_name));
  if (op == nullptr) {
    return api_error(res, "unknown_op", "no operation " + std::string(op_name));
  }
  const bool post = req.method == "POST";
  if (!post && !is_read(*op)) {
    return api_error(res, "bad_request", std::string(op->name) + " changes the service: POST it");
  }
  auto caller = authenticate(req, res, post);
  if (!caller) return;
  std::string blob;
  if (post && !req.body.empty()) {
    if (!control::json_depth_within(req.body, options_.max_json_depth)) {
      return api_error(res, "bad_request",
                       "the JSON body nests deeper than service.http.max_json_depth (" +
                           std::to_string(options_.max_json_depth) + ")");
    }
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return api_error(res, "bad_request", "the request body is not a JSON object (in UTF-8 text)");
    }
    if (auto p = body.find("payload"); p != body.end()) {
      if (!p->is_string()) return api_error(res, "bad_request", "payload: expected a string");
      blob = p->get<std::string>();
      body.erase(p);
    } else if (auto b = body.find("payload_base64"); b != body.end()) {
      auto bytes =
          b->is_string() ? dead_letter_file::decode_base64(b->get<std::string>()) : std::nullopt;
      if (!bytes) return api_error(res, "bad_request", "payload_base64: expected base64");
      blob = std::move(*bytes);
      body.erase(b);
    }
    for (auto& [k, v] : args.items()) body[k] = v;  // the path's arguments win
    args = std::move(body);
  } else if (!post) {
    json q = typed_args(op->name, req.query);
    for (auto& [k, v] : args.items()) q[k] = v;
    args = std::move(q);
  }
  if (op->stream) return stream_events(res, *caller, std::move(args));
  const CallReply reply = call(op->name, std::move(args), std::move(blob), *caller);
  res.status = reply.ok ? 200 : http_status(reply.code);
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(api_body(reply), kJson);
}

void Api::stream_events(HttpResponse& res, const Caller& caller, json args) {
  const ops::OpInfo* op = ops::find_op(ops::Events::kName);
  if (!grant_for(*op, caller.access).allowed) {
    return api_error(res, "forbidden", "events needs read rights");
  }
  const auto f = args.find("follow");
  const bool follow = f == args.end() || !f->is_boolean() || f->get<bool>();
  auto slot = take_stream_slot(caller.access);
  if (!slot) {
    return api_error(res, "busy",
                     "every event stream this listener serves to " +
                         std::string(caller.access == Access::kAdmin ? "admins" : "this right") +
                         " is open (service.http.max_streams, admin_reserved_streams)");
  }
  // Each flush asks for the recent events (`events` with follow=false, the hub's last 256)
  // and writes those after the last one it wrote. A follow stream would make the hub encode
  // every event for this reader: 600 k a second beside a batch of 300 k tasks a second, a
  // third of the batch's throughput on two cores. A browser shows a few a second anyway.
  args["follow"] = false;
  res.set_header("Content-Type", "text/event-stream");
  res.set_header("Cache-Control", "no-store");  // docs/security.md: every response but assets
  res.set_header("X-Accel-Buffering", "no");
  res.stream = [this, caller, args, follow, slot](StreamSink& sink) {
    std::string last;  // the last frame written
    auto written = Clock::now();
    bool first = true;
    while (true) {
      if (!first && !sink.wait(options_.flush)) {
        (void)sink.write("event: end\ndata: {}\n\n");
        return;
      }
      first = false;
      std::vector<std::string> frames;
      const CallReply r = call(ops::Events::kName, args, {}, caller, &frames);
      if (!r.ok) {
        (void)sink.write("event: end\ndata: " + api_body(r) + "\n\n");
        return;
      }
      std::string out;
      std::size_t from = 0;
      bool found = last.empty();
      for (std::size_t i = frames.size(); i-- > 0 && !found;) {
        if (frames[i] == last) {
          from = i + 1;
          found = true;
        }
      }
      // The last frame written is no longer among the recent ones: some were skipped.
      if (!found && !frames.empty()) out += "event: gap\ndata: {}\n\n";
      for (std::size_t i = from; i < frames.size(); ++i) out += "data: " + frames[i] + "\n\n";
      if (from < frames.size()) last = frames.back();
      if (!follow) {
        out += "event: end\ndata: {}\n\n";
        (void)sink.write(out);
        return;
      }
      if (out.empty()) {
        if (Clock::now() - written < options_.heartbeat) continue;
        out = ": keep-alive\n\n";  // how a closed client is found
      }
      if (!sink.write(out)) return;
      written = Clock::now();
    }
  };
}

void Api::route(HttpServer& server, const char* method, const char* pattern, bool large_body,
                std::function<std::string(const HttpRequest&)> op_name,
                std::function<json(const HttpRequest&)> args) {
  HttpServer::Route r;
  r.method = method;
  r.path = std::regex(pattern);
  r.lane = HttpServer::Lane::kApi;
  r.large_body = large_body;
  r.admit = [this, op_name](const HttpRequest& req, HttpResponse& res) {
    const ops::OpInfo* op = op_named(op_name(req));
    if (op == nullptr) {
      api_error(res, "unknown_op", "no operation " + op_name(req));
      return false;
    }
    return admit_op(req, res, op);
  };
  r.handler = [this, op_name, args](const HttpRequest& req, HttpResponse& res) {
    run(req, res, op_name(req), args(req));
  };
  server.add(std::move(r));
}

void Api::install(HttpServer& server) {
  using Req = HttpRequest;
  const auto fixed = [](std::string name) { return [name](const Req&) { return name; }; };
  const auto group = [](std::size_t i) { return [i](const Req& q) { return q.matches[i]; }; };
  const auto none = [](const Req&) { return json::object(); };
  const auto pool = [](const Req& q) { return json{{"pool", q.matches[1]}}; };
  const auto id = [](const Req& q) { return json{{"id", id_of(q.matches[1])}}; };
  // Resource paths: an operation, some arguments from the path.
  route(server, "GET", "/api/v1/pools", false, fixed("status"), none);
  route(server, "GET", R"(/api/v1/pools/([^/]+)/(workers|stats))", false, group(2), pool);
  route(server, "POST", R"(/api/v1/pools/([^/]+)/tasks)", true, fixed("submit"), pool);
  route(server, "POST",
        R"(/api/v1/pools/([^/]+)/(scale|strategy|drain|resume|restart|kill-worker))", false,
        group(2), pool);
  route(server, "GET", R"(/api/v1/tasks/(\d{1,19}))", false, fixed("task"), id);
  route(server, "GET", R"(/api/v1/tasks/(\d{1,19})/wait)", false, fixed("wait"), id);
  route(server, "POST", R"(/api/v1/tasks/(\d{1,19})/cancel)", false, fixed("cancel"), id);
  route(server, "GET", "/api/v1/dlq", false, fixed("dlq_list"), none);
  route(server, "GET", R"(/api/v1/dlq/(\d{1,19}))", false, fixed("dlq_show"), id);
  route(
      server, "POST", R"(/api/v1/dlq/(replay|purge))", false,
      [](const Req& q) { return "dlq_" + q.matches[1]; }, none);
  // Every operation by its name; the ones that carry payloads take the large bodies.
  route(server, "GET", R"(/api/v1/([a-z_-]+))", false, group(1), none);
  route(server, "POST", R"(/api/v1/(submit|submit_batch|submit-batch))", true, group(1), none);
  route(server, "POST", R"(/api/v1/([a-z_-]+))", false, group(1), none);
}

}  // namespace sandpool::http
