#include "http/api.hpp"

#include <algorithm>
#include <utility>

#include <sandpool/control_ops.hpp>
#include <sandpool/dead_letter_file.hpp>

#include "control/op_json.hpp"

namespace sandpool::http {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
constexpr std::string_view kSessionCookie = "sp_session";

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

}  // namespace

json typed_args(std::string_view op, const httplib::Params& fields,
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

namespace {

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

std::string cookie_value(const httplib::Request& req, std::string_view name) {
  const std::string header = req.get_header_value("Cookie");
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

}  // namespace

Api::Api(ControlHandler& handler, HttpAccess& access, ApiOptions options)
    : handler_(handler), access_(access), options_(options) {}

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

void api_error(httplib::Response& res, std::string_view code, std::string_view message) {
  res.status = Api::http_status(code);
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(json{{"error", code}, {"message", message}}.dump(), kJson);
}

std::string api_body(const CallReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  if (!body.is_object()) body = json::object();
  if (!reply.ok) return json{{"error", reply.code}, {"message", body.value("message", "")}}.dump();
  if (!reply.blob.empty()) {
    if (valid_utf8(reply.blob)) {
      body["blob"] = reply.blob;
    } else {
      body["blob_base64"] = dead_letter_file::encode_base64(reply.blob);
    }
  }
  return body.dump();
}

std::size_t Api::open_streams() const {
  std::lock_guard lock(mu_);
  return streams_;
}

void Api::stop() {
  std::list<std::weak_ptr<LocalCall>> calls;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    calls.swap(calls_);
  }
  stop_cv_.notify_all();
  for (auto& weak : calls) {
    if (auto c = weak.lock()) c->abandon();
  }
}

std::shared_ptr<void> Api::track(const std::shared_ptr<LocalCall>& call) {
  std::list<std::weak_ptr<LocalCall>>::iterator it;
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      call->abandon();
      return nullptr;
    }
    it = calls_.insert(calls_.end(), call);
  }
  return std::shared_ptr<void>(nullptr, [this, it](void*) {
    std::lock_guard lock(mu_);
    if (!stopped_) calls_.erase(it);
  });
}

std::optional<Caller> Api::authenticate(const httplib::Request& req, httplib::Response& res,
                                        bool changes_state) {
  // A query parameter named like a token (token, access_token, ...): the URL's query only,
  // since req.params also holds a form's fields.
  const std::size_t query = req.target.find('?');
  if (query != std::string::npos) {
    httplib::Params in_url;
    httplib::detail::parse_query_text(req.target.substr(query + 1), in_url);
    for (const auto& [key, value] : in_url) {
      if (key.find("token") == std::string::npos) continue;
      api_error(res, "bad_request",
                "a token is never taken from a URL (it would stay in logs and history): send "
                "it in an Authorization: Bearer header");
      return std::nullopt;
    }
  }
  Caller caller;
  const std::string auth = req.get_header_value("Authorization");
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
  const std::string id = cookie_value(req, kSessionCookie);
  if (id.empty()) return caller;
  caller.session = access_.session(id);
  if (!caller.session) return caller;  // expired: anonymous (the page offers the login)
  caller.session_id = id;
  caller.access = caller.session->access;
  if (changes_state) {
    std::string sent = req.get_header_value("X-CSRF-Token");
    if (sent.empty() && req.has_param("csrf")) sent = req.get_param_value("csrf");
    if (sent != caller.session->csrf) {
      api_error(res, "forbidden",
                "a request made with the session cookie must carry the session's CSRF token "
                "(X-CSRF-Token header or csrf form field)");
      return std::nullopt;
    }
  }
  return caller;
}

CallReply Api::call(std::string_view op_name, json args, std::string blob, const Caller& caller,
                    std::vector<std::string>* events) {
  const ops::OpInfo* op = ops::find_op(op_name);
  if (op == nullptr) {
    return {
        false, "unknown_op", json{{"message", "no operation " + std::string(op_name)}}.dump(), {}};
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
    return {false, anonymous ? "unauthorized" : "forbidden", json{{"message", why}}.dump(), {}};
  }
  auto local = LocalCall::start(handler_, std::string(op_name), std::move(args), std::move(blob),
                                grant.rights);
  const auto guard = track(local);
  if (events == nullptr) return *local->wait_final(LocalCall::Clock::time_point::max());
  std::optional<CallReply> final;
  while (!final) {
    for (std::string& e : local->next_events(LocalCall::Clock::time_point::max(), &final)) {
      events->push_back(std::move(e));
    }
  }
  return *final;
}

void Api::run(const httplib::Request& req, httplib::Response& res, std::string_view op_name,
              json args) {
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
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return api_error(res, "bad_request", "the request body is not a JSON object");
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
    json q = typed_args(op->name, req.params);
    for (auto& [k, v] : args.items()) q[k] = v;
    args = std::move(q);
  }
  if (op->stream) return stream_events(req, res, *caller, std::move(args));
  const CallReply reply = call(op->name, std::move(args), std::move(blob), *caller);
  res.status = reply.ok ? 200 : http_status(reply.code);
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(api_body(reply), kJson);
}

void Api::stream_events(const httplib::Request&, httplib::Response& res, const Caller& caller,
                        json args) {
  const ops::OpInfo* op = ops::find_op(ops::Events::kName);
  if (!grant_for(*op, caller.access).allowed) {
    return api_error(res, "forbidden", "events needs read rights");
  }
  const bool follow = args.value("follow", true);
  {
    std::lock_guard lock(mu_);
    if (streams_ >= options_.max_streams) {
      return api_error(res, "busy",
                       std::to_string(options_.max_streams) +
                           " event streams are open, the most this listener serves at once");
    }
    ++streams_;
  }
  // Each flush asks for the recent events (`events` with follow=false, the hub's last 256)
  // and writes those after the last one it wrote. A follow stream would make the hub encode
  // every event for this reader: 600 k a second beside a batch of 300 k tasks a second, a
  // third of the batch's throughput on two cores. A browser shows a few a second anyway.
  args["follow"] = false;
  struct Cursor {
    std::string last;  // the last frame written
    LocalCall::Clock::time_point written = LocalCall::Clock::now();
    bool first = true;
  };
  auto cursor = std::make_shared<Cursor>();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, caller, args, follow, cursor](std::size_t, httplib::DataSink& sink) {
        if (!cursor->first && !wait_unless_stopped(options_.flush)) {
          const std::string end = "event: end\ndata: {}\n\n";
          sink.write(end.data(), end.size());
          sink.done();
          return true;
        }
        cursor->first = false;
        std::vector<std::string> frames;
        const CallReply r = call(ops::Events::kName, args, {}, caller, &frames);
        std::string out;
        if (!r.ok) {
          out = "event: end\ndata: " + api_body(r) + "\n\n";
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        std::size_t from = 0;
        bool found = cursor->last.empty();
        for (std::size_t i = frames.size(); i-- > 0 && !found;) {
          if (frames[i] == cursor->last) {
            from = i + 1;
            found = true;
          }
        }
        // The last frame written is no longer among the recent ones: some were skipped.
        if (!found && !frames.empty()) out += "event: gap\ndata: {}\n\n";
        for (std::size_t i = from; i < frames.size(); ++i) out += "data: " + frames[i] + "\n\n";
        if (from < frames.size()) cursor->last = frames.back();
        if (!follow) {
          out += "event: end\ndata: {}\n\n";
        } else if (out.empty()) {
          if (LocalCall::Clock::now() - cursor->written < options_.heartbeat) return true;
          out = ": keep-alive\n\n";  // how a closed client is found
        }
        if (!sink.write(out.data(), out.size())) return false;
        cursor->written = LocalCall::Clock::now();
        if (!follow) sink.done();
        return true;
      },
      [this](bool) {
        std::lock_guard lock(mu_);
        --streams_;
      });
}

bool Api::wait_unless_stopped(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !stop_cv_.wait_for(lock, d, [this] { return stopped_; });
}

void Api::install(httplib::Server& server) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  // Resource paths: an operation, some arguments from the path.
  server.Get("/api/v1/pools",
             [this](const Req& q, Res& r) { run(q, r, "status", json::object()); });
  server.Get(R"(/api/v1/pools/([^/]+)/(workers|stats))", [this](const Req& q, Res& r) {
    run(q, r, q.matches[2].str(), {{"pool", q.matches[1].str()}});
  });
  server.Post(R"(/api/v1/pools/([^/]+)/tasks)", [this](const Req& q, Res& r) {
    run(q, r, "submit", {{"pool", q.matches[1].str()}});
  });
  server.Post(R"(/api/v1/pools/([^/]+)/(scale|strategy|drain|resume|restart|kill-worker))",
              [this](const Req& q, Res& r) {
                run(q, r, q.matches[2].str(), {{"pool", q.matches[1].str()}});
              });
  server.Get(R"(/api/v1/tasks/(\d{1,19}))", [this](const Req& q, Res& r) {
    run(q, r, "task", {{"id", std::stoull(q.matches[1].str())}});
  });
  server.Get(R"(/api/v1/tasks/(\d{1,19})/wait)", [this](const Req& q, Res& r) {
    run(q, r, "wait", {{"id", std::stoull(q.matches[1].str())}});
  });
  server.Post(R"(/api/v1/tasks/(\d{1,19})/cancel)", [this](const Req& q, Res& r) {
    run(q, r, "cancel", {{"id", std::stoull(q.matches[1].str())}});
  });
  server.Get("/api/v1/dlq",
             [this](const Req& q, Res& r) { run(q, r, "dlq_list", json::object()); });
  server.Get(R"(/api/v1/dlq/(\d{1,19}))", [this](const Req& q, Res& r) {
    run(q, r, "dlq_show", {{"id", std::stoull(q.matches[1].str())}});
  });
  server.Post(R"(/api/v1/dlq/(replay|purge))", [this](const Req& q, Res& r) {
    run(q, r, "dlq_" + q.matches[1].str(), json::object());
  });
  // Every operation by its name.
  server.Get(R"(/api/v1/([a-z_-]+))",
             [this](const Req& q, Res& r) { run(q, r, q.matches[1].str(), json::object()); });
  server.Post(R"(/api/v1/([a-z_-]+))",
              [this](const Req& q, Res& r) { run(q, r, q.matches[1].str(), json::object()); });
}

}  // namespace sandpool::http
