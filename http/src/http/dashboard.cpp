#include "http/dashboard.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <utility>

#include <sandpool/control/op_json.hpp>
#include "http/dashboard_pages.hpp"
#include "http/html.hpp"

namespace sandpool::http {
namespace {

using nlohmann::json;
using Req = HttpRequest;
using Res = HttpResponse;
constexpr const char* kHtml = "text/html; charset=utf-8";

// The typed reply of Op (and its blob), or the error the call ended with.
template <class Op>
struct Typed {
  std::optional<typename Op::Reply> reply;
  std::string blob;
  std::string code, message;  // when !reply
};

template <class Op>
Typed<Op> call_op(Api& api, const typename Op::Args& args, const Caller& caller,
                  std::vector<std::string>* events = nullptr) {
  json encoded = json::object();
  if constexpr (!std::is_same_v<typename Op::Args, ops::NoArgs>) encoded = ops::encode(args);
  CallReply r = api.call(Op::kName, std::move(encoded), {}, caller, events);
  Typed<Op> out;
  const json body = json::parse(r.body, nullptr, false);
  if (!r.ok) {
    out.code = r.code;
    out.message = body.is_object() ? body.value("message", "") : "";
    return out;
  }
  typename Op::Reply reply;
  if (Status st = ops::decode(body, &reply); !st) {
    out.code = "internal";
    out.message = st.message();
    return out;
  }
  out.reply = std::move(reply);
  out.blob = std::move(r.blob);
  return out;
}

// A path of this site to come back to after a form (never another site's: "//host").
// Browsers drop tabs and newlines from a URL and read a backslash as a slash, so
// "/\t/evil.example" would be "//evil.example": no control character, space or backslash
// anywhere, and no "//" at the start.
std::string local_path(const std::string& path) {
  const bool bad_char = std::any_of(path.begin(), path.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f || c == '\\';
  });
  if (path.empty() || path[0] != '/' || (path.size() > 1 && path[1] == '/') || bad_char) {
    return "/";
  }
  return path;
}

void redirect_with(Res& res, const std::string& to, const std::string& message) {
  std::string where = local_path(to);
  // Drop an earlier flash message from the path.
  if (auto m = where.find("msg="); m != std::string::npos) {
    where.erase(m > 0 && (where[m - 1] == '?' || where[m - 1] == '&') ? m - 1 : m);
  }
  where += (where.find('?') == std::string::npos ? "?" : "&") + std::string("msg=") +
           url_encode(message);
  res.status = 303;
  res.set_header("Location", where);
}

std::int64_t wall_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::int64_t> since_ms(const std::string& since) {
  const std::int64_t minute = 60000;
  std::int64_t back = 0;
  if (since == "15m") back = 15 * minute;
  if (since == "1h") back = 60 * minute;
  if (since == "24h") back = 24 * 60 * minute;
  if (since == "7d") back = 7 * 24 * 60 * minute;
  if (back == 0) return std::nullopt;
  return wall_ms_now() - back;
}

ops::DlqFilter dlq_filter(const std::string& pool, const std::string& type,
                          const std::string& reason, const std::string& since) {
  ops::DlqFilter f;
  if (!pool.empty()) f.pool = pool;
  if (!type.empty()) f.type = type;
  if (!reason.empty()) f.reason = reason;
  f.since_ms = since_ms(since);
  return f;
}

// What a route's handler reaches: the dashboard's Api and access (Dashboard's members).
struct Site {
  Api& api;
  HttpAccess& access;
};

// The viewer of a page; nullopt when the request was refused (res says why).
std::optional<std::pair<Caller, pages::Viewer>> viewer(const Site& site, const Req& req, Res& res,
                                                       bool changes_state) {
  auto caller = site.api.authenticate(req, res, changes_state);
  if (!caller) return std::nullopt;
  pages::Viewer v;
  v.access = caller->access;
  if (caller->session) v.csrf = caller->session->csrf;
  v.read_only = !site.access.has_admin_token();
  v.read_token = site.access.has_read_token();
  if (req.has_param("msg")) v.message = req.param("msg");
  v.path = req.path;
  return std::pair{std::move(*caller), std::move(v)};
}

void send_page(Res& res, const pages::Viewer& v, std::string_view title, const std::string& body,
               int status = 200) {
  res.status = status;
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' "
                 "data:; frame-ancestors 'none'; form-action 'self'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "same-origin");
  res.set_header("Cache-Control", "no-store");
  res.set_content(pages::layout(v, title, body), kHtml);
}

void send_error(Res& res, const pages::Viewer& v, const std::string& code,
                const std::string& message) {
  send_page(res, v, code, pages::error_body(code, message), Api::http_status(code));
}

// Who may reach a route, decided from its header before its body is read.
enum class Gate : std::uint8_t {
  kOpen,  // anyone (the handler may still refuse)
  kPage,  // a page: anonymous viewers go to the login page when the listener refuses them
  kDlq,   // the dead-letter form: the rights of dlq_replay
  kOp,    // a form naming an operation: its rights; never a stream
};

bool page_admit(const Site& site, const Req& req, Res& res) {
  auto caller = site.api.authenticate(req, res, false);
  if (!caller) return false;
  if (caller->access == Access::kAnonymous && site.api.deny_anonymous()) {
    res.status = 303;
    res.set_header("Location", "/login");
    return false;
  }
  return true;
}

bool op_admit(const Site& site, const Req& req, Res& res) {
  const ops::OpInfo* op = ops::find_op(req.matches[1]);
  if (op == nullptr) {
    api_error(res, "unknown_op", "no operation " + req.matches[1]);
    return false;
  }
  if (op->stream) {
    api_error(res, "bad_request",
              std::string(op->name) + " is a stream: the events page shows it (GET /events)");
    return false;
  }
  return site.api.admit_op(req, res, op);
}

// Routes ------------------------------------------------------------------------------------

void static_css(const Site&, const Req&, Res& res) {
  res.set_header("Cache-Control", "max-age=3600");
  res.set_content(kDashboardCss, "text/css; charset=utf-8");
}

void static_js(const Site&, const Req&, Res& res) {
  res.set_header("Cache-Control", "max-age=3600");
  res.set_content(kDashboardJs, "text/javascript; charset=utf-8");
}

void favicon(const Site&, const Req&, Res& res) { res.status = 204; }

void overview_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  auto status = call_op<ops::ServerStatus>(site.api, {}, caller);
  if (!status.reply) return send_error(res, v, status.code, status.message);
  auto stats = call_op<ops::Stats>(site.api, {}, caller);
  if (!stats.reply) return send_error(res, v, stats.code, stats.message);
  send_page(res, v, "Overview", pages::overview_body(v, *status.reply, *stats.reply));
}

void pool_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::string pool = req.matches[1];
  auto stats = call_op<ops::Stats>(site.api, {pool}, caller);
  if (!stats.reply || stats.reply->pools.empty()) {
    return send_error(res, v, stats.reply ? "not_found" : stats.code, stats.message);
  }
  auto workers = call_op<ops::Workers>(site.api, {pool}, caller);
  if (!workers.reply) return send_error(res, v, workers.code, workers.message);
  send_page(res, v, "Pool " + pool,
            pages::pool_body(v, stats.reply->pools.front(), *workers.reply));
}

void tasks_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  pages::TaskFilter f{req.param("id"),  req.param("pool"),  req.param("type"),  req.param("state"),
                      req.param("key"), req.param("since"), req.param("tenant")};
  if (!f.id.empty()) {
    // The find form's id leads to its task; one that no task can have is said so (it
    // used to be ignored, and the page listed every task instead).
    std::uint64_t id = 0;
    const auto [end, ec] = std::from_chars(f.id.data(), f.id.data() + f.id.size(), id);
    if (ec != std::errc() || end != f.id.data() + f.id.size()) {
      return send_error(res, v, "bad_request",
                        "id: a task id is an unsigned integer below 2^64, not " + f.id);
    }
    res.status = 303;
    res.set_header("Location", "/tasks/" + std::to_string(id));
    return;
  }
  ops::TaskListArgs args;
  args.pool = f.pool;
  args.type = f.type;
  args.state = f.state;
  args.key = f.key;
  if (!f.tenant.empty()) args.tenant = f.tenant;
  args.since_ms = since_ms(f.since);
  args.limit = 200;
  auto list = call_op<ops::TaskList>(site.api, args, caller);
  send_page(res, v, "Tasks",
            pages::tasks_body(v, f, list.reply ? &*list.reply : nullptr,
                              list.code + ": " + list.message));
}

void task_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::uint64_t id = std::stoull(req.matches[1]);
  auto task = call_op<ops::Task>(site.api, {id}, caller);
  if (!task.reply) return send_error(res, v, task.code, task.message);
  std::optional<std::string> result;
  if (!task.reply->result_withheld && !task.blob.empty()) result = task.blob;
  send_page(res, v, "Task " + std::to_string(id), pages::task_body(v, *task.reply, result));
}

void schedules_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  auto list = call_op<ops::ScheduleList>(site.api, {}, caller);
  if (!list.reply) return send_error(res, v, list.code, list.message);
  // How each last slot's task stands: one task read per schedule, for the first
  // kScheduleTasksRead schedules (past them the page says the task's id only).
  constexpr std::size_t kScheduleTasksRead = 200;
  std::vector<pages::ScheduleRow> rows;
  for (ops::ScheduleInfo& s : list.reply->schedules) {
    pages::ScheduleRow row{std::move(s), std::nullopt};
    if (row.info.last_task && rows.size() < kScheduleTasksRead) {
      auto task = call_op<ops::Task>(site.api, {*row.info.last_task}, caller);
      if (task.reply) {
        row.last_state = task.reply->state;
        if (task.reply->reason) *row.last_state += " (" + *task.reply->reason + ")";
      }
    }
    rows.push_back(std::move(row));
  }
  send_page(res, v, "Schedules", pages::schedules_body(v, rows));
}

void dlq_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  pages::LetterFilter f{req.param("pool"), req.param("type"),  req.param("reason"),
                        req.param("text"), req.param("since"), req.param("cursor")};
  ops::DlqListArgs args;
  args.filter = dlq_filter(f.pool, f.type, f.reason, f.since);
  args.limit = f.text.empty() ? 100 : 1000;
  if (!f.cursor.empty()) args.cursor = f.cursor;
  auto list = call_op<ops::DlqList>(site.api, args, caller);
  if (!list.reply) {
    if (list.code == "unauthorized") {
      return send_page(res, v, "Dead letters",
                       "<h1>Dead letters</h1><p class=muted id=need-token>Dead letters hold "
                       "task payloads: they are shown with the read or admin token (<a "
                       "href=/login>log in</a>). Their count is on the overview.</p>");
    }
    return send_error(res, v, list.code, list.message);
  }
  send_page(res, v, "Dead letters", pages::dlq_body(v, f, *list.reply));
}

void letter_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::uint64_t id = std::stoull(req.matches[1]);
  auto letter = call_op<ops::DlqShow>(site.api, {id}, caller);
  if (!letter.reply) return send_error(res, v, letter.code, letter.message);
  send_page(res, v, "Dead letter " + std::to_string(id),
            pages::letter_body(v, *letter.reply, letter.blob));
}

void events_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::string pool = req.param("pool");
  std::vector<std::string> frames;
  auto done = call_op<ops::Events>(site.api, {pool, false}, caller, &frames);
  if (!done.reply) return send_error(res, v, done.code, done.message);
  std::vector<ops::PoolEventRecord> recent;
  for (const std::string& f : frames) {
    ops::PoolEventRecord e;
    if (ops::decode(json::parse(f, nullptr, false), &e)) recent.push_back(std::move(e));
  }
  send_page(res, v, "Events", pages::events_body(v, pool, recent));
}

void login_page(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, false);
  if (!w) return;
  send_page(res, w->second, "Log in", pages::login_body(w->second, ""));
}

// The token only from the form's body (a URL stays in logs and history), and at most
// HttpAccess::kLoginFailures failures a minute from one client address.
void login_form(const Site& site, const Req& req, Res& res) {
  pages::Viewer v;
  v.read_only = !site.access.has_admin_token();
  v.read_token = site.access.has_read_token();
  if (req.query.count("token") != 0) {
    return send_page(res, v, "Log in",
                     pages::login_body(v,
                                       "A token is never taken from the URL: type it in "
                                       "the form."),
                     400);
  }
  if (auto wait = site.access.login_throttled(req.peer)) {
    res.set_header("Retry-After", std::to_string(*wait));
    return send_page(res, v, "Log in",
                     pages::login_body(v,
                                       "Too many failed logins from this address: try "
                                       "again in a minute."),
                     429);
  }
  const auto access = site.access.check_token(req.param("token"));
  if (!access) {
    site.access.login_failed(req.peer);
    return send_page(res, v, "Log in", pages::login_body(v, "That is not a token of this service."),
                     401);
  }
  const std::string id = site.access.open_session(*access);
  res.set_header("Set-Cookie",
                 site.api.cookie_name() + "=" + id + "; Path=/; HttpOnly; SameSite=Strict");
  redirect_with(res, "/", "logged in with the " + std::string(to_string(*access)) + " token");
}

void logout_form(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, true);
  if (!w) return;
  site.access.close_session(w->first.session_id);
  res.set_header("Set-Cookie",
                 site.api.cookie_name() + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  redirect_with(res, "/", "logged out");
}

// The dead-letter list's form: replay or purge the selected letters or all matching.
void dlq_form(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, true);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::string action = req.param("action");
  const bool replay = action.rfind("replay", 0) == 0;
  const char* op = replay ? "dlq_replay" : "dlq_purge";
  std::vector<json> selectors;
  if (action.find("matching") != std::string::npos) {
    const ops::DlqFilter f = dlq_filter(req.param("f_pool"), req.param("f_type"),
                                        req.param("f_reason"), req.param("f_since"));
    ops::DlqSelector sel;
    const bool empty = !f.pool && !f.type && !f.reason && !f.since_ms;
    if (empty) {
      sel.all = true;
    } else {
      sel.filter = f;
    }
    selectors.push_back(ops::encode(sel));
  } else {
    // At most a page's worth of letters (the list shows up to 1000) per form.
    for (std::size_t i = 0; i < req.param_count("id") && selectors.size() < 1000; ++i) {
      // A letter id: digits that fit 64 bits (anything else selects nothing).
      const std::string id = req.param("id", i);
      std::uint64_t value = 0;
      const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), value);
      if (id.empty() || ec != std::errc() || end != id.data() + id.size()) continue;
      selectors.push_back(json{{"id", value}});
    }
  }
  if (selectors.empty()) return redirect_with(res, req.param("return"), "nothing selected");
  std::uint64_t done = 0;
  std::string error;
  for (json& sel : selectors) {
    const CallReply r = site.api.call(op, std::move(sel), {}, caller);
    const json body = json::parse(r.body, nullptr, false);
    if (!r.ok) {
      error = r.code + ": " + (body.is_object() ? body.value("message", "") : "");
      break;
    }
    done +=
        replay ? body.value("replayed", std::uint64_t{0}) : body.value("purged", std::uint64_t{0});
    if (!replay && body.is_object() && body.contains("first_error")) {  // stopped part way
      error = "purged " + std::to_string(done) +
              " letter(s), then stopped: " + body.value("first_error", std::string());
      break;
    }
  }
  redirect_with(res, req.param("return"),
                error.empty() ? std::string(replay ? "replayed " : "purged ") +
                                    std::to_string(done) + " letter(s)"
                              : error);
}

// Every other form: one operation, its arguments from the form's fields.
void op_form(const Site& site, const Req& req, Res& res) {
  auto w = viewer(site, req, res, true);
  if (!w) return;
  auto& [caller, v] = *w;
  const std::string op = req.matches[1];
  const json args = typed_args(op, req.params, {"csrf", "return"});
  const CallReply r = site.api.call(op, args, {}, caller);
  const json body = json::parse(r.body, nullptr, false);
  std::string message = r.ok ? op + ": done" : r.code + ": ";
  if (!r.ok && body.is_object()) message += body.value("message", "");
  if (r.ok && op == "kill_worker") message = "kill_worker: signal sent";
  if (r.ok && op == "dlq_replay")
    message =
        "replayed; new task " + body.value("ids", json::array())
                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!r.ok && (r.code == "unauthorized" || r.code == "forbidden")) {
    return send_page(res, v, "Refused",
                     pages::error_body(r.code, message.substr(r.code.size() + 2)),
                     Api::http_status(r.code));
  }
  redirect_with(res, req.param("return"), message);
}

struct PageRoute {
  const char* method;
  const char* path;  // a regex; its groups are the request's matches
  Gate gate;
  void (*handle)(const Site&, const Req&, Res&);
};

// The dashboard's routes (docs/dashboard.md), in the order the server tries them.
constexpr PageRoute kRoutes[] = {
    {"GET", "/static/app.css", Gate::kOpen, static_css},
    {"GET", "/static/app.js", Gate::kOpen, static_js},
    {"GET", "/favicon.ico", Gate::kOpen, favicon},
    {"GET", "/", Gate::kPage, overview_page},
    {"GET", R"(/pools/([^/]+))", Gate::kPage, pool_page},
    {"GET", "/tasks", Gate::kPage, tasks_page},
    {"GET", R"(/tasks/(\d{1,19}))", Gate::kPage, task_page},
    {"GET", "/schedules", Gate::kPage, schedules_page},
    {"GET", "/dlq", Gate::kPage, dlq_page},
    {"GET", R"(/dlq/(\d{1,19}))", Gate::kPage, letter_page},
    {"GET", "/events", Gate::kPage, events_page},
    {"GET", "/login", Gate::kOpen, login_page},
    {"POST", "/login", Gate::kOpen, login_form},
    {"POST", "/logout", Gate::kOpen, logout_form},
    {"POST", "/ui/dlq", Gate::kDlq, dlq_form},
    {"POST", R"(/ui/([a-z_]+))", Gate::kOp, op_form},
};

}  // namespace

void Dashboard::install(HttpServer& server) {
  const Site site{api_, access_};
  for (const PageRoute& r : kRoutes) {
    HttpServer::Admit admit;
    switch (r.gate) {
      case Gate::kOpen:
        break;
      case Gate::kPage:
        admit = [site](const Req& req, Res& res) { return page_admit(site, req, res); };
        break;
      case Gate::kDlq:
        admit = [site](const Req& req, Res& res) {
          return site.api.admit_op(req, res, ops::find_op(ops::DlqReplay::kName));
        };
        break;
      case Gate::kOp:
        admit = [site](const Req& req, Res& res) { return op_admit(site, req, res); };
        break;
    }
    server.add({r.method, std::regex(r.path), HttpServer::Lane::kApi, false, std::move(admit),
                [site, handle = r.handle](const Req& req, Res& res) { handle(site, req, res); }});
  }
}

}  // namespace sandpool::http
