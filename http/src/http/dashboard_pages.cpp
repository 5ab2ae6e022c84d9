#include "http/dashboard_pages.hpp"

#include <cstdio>

#include "http/html.hpp"

namespace sandpool::http::pages {
namespace {

std::string num(std::uint64_t v) { return std::to_string(v); }

std::string ms(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", *v);
  return buf;
}

// A hidden field carrying the session's CSRF token and where to come back to.
std::string form_fields(const Viewer& v) {
  return "<input type=hidden name=csrf value=\"" + escape(v.csrf) +
         "\"><input type=hidden name=return value=\"" + escape(v.path) + "\">";
}

// A one-button form posting `op` (a /ui/ action) with hidden `fields` (name, value).
std::string action_button(const Viewer& v, std::string_view op, std::string_view label,
                          const std::vector<std::pair<std::string, std::string>>& fields,
                          std::string_view cls = "") {
  std::string out =
      "<form class=inline method=post action=\"/ui/" + std::string(op) + "\">" + form_fields(v);
  for (const auto& [name, value] : fields) {
    out += "<input type=hidden name=\"" + escape(name) + "\" value=\"" + escape(value) + "\">";
  }
  out += "<button type=submit class=\"" + std::string(cls) + "\" data-op=\"" + std::string(op) +
         "\">" + escape(label) + "</button></form>";
  return out;
}

std::string attempts_table(const std::vector<ops::AttemptAccount>& history) {
  if (history.empty()) return "<p class=muted>No attempt yet.</p>";
  std::string out =
      "<table class=grid><thead><tr><th>#</th><th>outcome</th><th>error</th><th>worker</th>"
      "<th>started</th><th>ended</th><th>took</th></tr></thead><tbody>";
  for (const ops::AttemptAccount& a : history) {
    out +=
        "<tr><td>" + std::to_string(a.number) + "</td><td class=\"outcome " + escape(a.outcome) +
        "\">" + escape(a.outcome) + "</td><td>" + escape(a.error) + "</td><td>" +
        (a.worker_pid != 0 ? std::to_string(a.worker_pid) : "-") + "</td><td>" +
        format_time(a.started_ms) + "</td><td>" + format_time(a.ended_ms) + "</td><td>" +
        (a.ended_ms >= a.started_ms && a.started_ms > 0 ? format_duration(a.ended_ms - a.started_ms)
                                                        : "-") +
        "</td></tr>";
    if (!a.backtrace.empty()) {
      out +=
          "<tr><td></td><td colspan=6><details><summary>backtrace of the hung attempt"
          "</summary><pre>" +
          escape(a.backtrace) + "</pre></details></td></tr>";
    }
  }
  return out + "</tbody></table>";
}

std::string bytes_preview(const Viewer& v, std::string_view what,
                          const std::optional<std::string>& bytes, bool withheld) {
  std::string out = "<h3>" + std::string(what) + "</h3>";
  if (bytes) return out + "<pre class=preview>" + preview(*bytes) + "</pre>";
  if (withheld || v.access == Access::kAnonymous) {
    return out +
           "<p class=muted>Shown with the read or admin token (<a href=/login>log in</a>)."
           "</p>";
  }
  return out + "<p class=muted>None.</p>";
}

// What a task was submitted with: its options, and its payload's start (already made text
// by poold: escaped here for HTML only) when the viewer's rights show payloads.
std::string submission_facts(const Viewer& v, const ops::TaskSubmission& s) {
  std::string out = "<h2>Submitted with</h2><dl class=facts id=task-options><dt>priority</dt><dd>" +
                    std::to_string(s.priority) + "</dd><dt>timeout</dt><dd>" +
                    (s.timeout ? std::to_string(s.timeout->count()) + " ms" : "the pool's") +
                    "</dd><dt>retries</dt><dd>" +
                    (s.retries ? std::to_string(*s.retries) : "the pool's") + "</dd>";
  if (!s.key.empty()) out += "<dt>key</dt><dd>" + escape(s.key) + "</dd>";
  if (!s.idempotency_key.empty()) {
    out += "<dt>idempotency key</dt><dd>" + escape(s.idempotency_key) + "</dd>";
  }
  out += "<dt>payload</dt><dd>" + std::to_string(s.payload_size) + " bytes</dd></dl>";
  out += "<h3>Payload</h3>";
  if (s.payload_preview) {
    return out + "<pre class=preview id=task-payload>" + escape(*s.payload_preview) + "</pre>";
  }
  (void)v;
  return out + "<p class=muted>Shown with the read or admin token (<a href=/login>log in</a>).</p>";
}

}  // namespace

std::string layout(const Viewer& v, std::string_view title, std::string_view body) {
  std::string out =
      "<!doctype html><html lang=en><head><meta charset=utf-8>"
      "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
      "<meta name=csrf content=\"" +
      escape(v.csrf) + "\"><title>" + escape(title) +
      " · sandpool</title><link rel=stylesheet href=/static/app.css></head><body>"
      "<header><a class=brand href=/>sandpool</a><nav><a href=/>Overview</a>"
      "<a href=/tasks>Tasks</a><a href=/schedules>Schedules</a><a href=/dlq>Dead letters</a>"
      "<a href=/events>Events</a></nav>"
      "<span class=who>";
  out += "rights: <b id=access>" + std::string(to_string(v.access)) + "</b> ";
  if (v.csrf.empty()) {
    out += "<a href=/login>log in</a>";
  } else {
    out += "<form class=inline method=post action=/logout><input type=hidden name=csrf value=\"" +
           escape(v.csrf) + "\"><button type=submit>log out</button></form>";
  }
  out += "</span></header>";
  if (v.read_only) {
    out +=
        "<p class=notice id=read-only>Read-only: no admin token is configured "
        "(service.http.admin_token_file), so nothing here can change the service.</p>";
  }
  if (!v.message.empty()) out += "<p class=flash id=flash>" + escape(v.message) + "</p>";
  out += "<main>";
  out += body;
  out += "</main><script src=/static/app.js></script></body></html>";
  return out;
}

std::string error_body(std::string_view code, std::string_view message) {
  return "<h1>" + escape(code) + "</h1><p class=error>" + escape(message) + "</p>";
}

std::string login_body(const Viewer& v, std::string_view error) {
  std::string out = "<h1>Log in</h1>";
  if (!error.empty()) out += "<p class=error>" + escape(error) + "</p>";
  if (v.read_only && !v.read_token) {
    out += "<p class=muted>No token is configured: there is nothing to log in to.</p>";
  }
  out +=
      "<form method=post action=/login class=stack><label>Token (the contents of "
      "service.http.admin_token_file or read_token_file)<input type=password name=token "
      "autocomplete=current-password required></label><button type=submit>Log in</button>"
      "</form><p class=muted>The token is kept in a session cookie (HttpOnly, SameSite=Strict),"
      " never in a URL.</p>";
  return out;
}

std::string overview_body(const Viewer& v, const ops::StatusReply& status,
                          const ops::StatsReply& stats) {
  std::string out = "<h1>Overview</h1><p class=muted>poold pid " + std::to_string(status.pid) +
                    ", up since " + format_time(status.started_ms) +
                    " UTC; dead letters "
                    "pending " +
                    num(status.dead_letter_store.pending) + ", written " +
                    num(status.dead_letter_store.written) + "</p>";
  out +=
      "<table class=grid id=pools><thead><tr><th>pool</th><th>state</th><th>workers</th>"
      "<th>queued</th><th>in flight</th><th>completed</th><th>dead-lettered</th>"
      "<th>restarts</th><th>p50 ms</th><th>p99 ms</th></tr></thead><tbody>";
  for (const ops::PoolCounters& p : stats.pools) {
    const std::string name = escape(p.name);
    out += "<tr data-pool=\"" + name + "\"><td><a href=\"/pools/" + escape(url_encode(p.name)) +
           "\">" + name + "</a></td><td data-k=state>" + escape(p.state) +
           (p.crash_loop ? " (crash loop)" : "") + "</td><td data-k=workers>" +
           std::to_string(p.workers) + "/" + std::to_string(p.target_workers) +
           "</td><td data-k=queued>" + num(p.queued) + "</td><td data-k=in_flight>" +
           num(p.in_flight) + "</td><td data-k=completed>" + num(p.completed) +
           "</td><td data-k=dead_lettered>" + num(p.dead_lettered) + "</td><td data-k=restarts>" +
           num(p.restarts) + "</td><td data-k=p50>" + ms(p.latency_ms.p50) +
           "</td><td data-k=p99>" + ms(p.latency_ms.p99) + "</td></tr>";
  }
  out += "</tbody></table>";
  out +=
      "<section class=charts id=charts hidden><h2>Last minutes</h2>"
      "<figure><figcaption>throughput (tasks/s)</figcaption><canvas id=chart-throughput "
      "width=460 height=160></canvas></figure>"
      "<figure><figcaption>latency p50 / p99 (ms)</figcaption><canvas id=chart-latency "
      "width=460 height=160></canvas></figure>"
      "<figure><figcaption>queue depth</figcaption><canvas id=chart-queue width=460 "
      "height=160></canvas></figure>"
      "<figure><figcaption>worker restarts (per poll)</figcaption><canvas id=chart-restarts "
      "width=460 height=160></canvas></figure><p id=legend class=muted></p></section>";
  (void)v;
  return out;
}

std::string pool_body(const Viewer& v, const ops::PoolCounters& p,
                      const ops::WorkersReply& workers) {
  const std::string name = escape(p.name);
  std::string out =
      "<h1>Pool " + name + "</h1><p>state <b id=pool-state>" + escape(p.state) + "</b>, workers " +
      std::to_string(p.workers) + "/" + std::to_string(p.target_workers) + ", queued " +
      num(p.queued) + " (throttled <span id=pool-throttled>" + num(p.throttled) +
      "</span>), scheduled <span id=pool-scheduled>" + num(p.scheduled) + "</span>, in flight " +
      num(p.in_flight) + ", completed " + num(p.completed) + ", dead-lettered " +
      num(p.dead_lettered) + ", restarts " + num(p.restarts) + ", latency p50 " +
      ms(p.latency_ms.p50) + " ms, p99 " + ms(p.latency_ms.p99) + " ms</p>";
  if (v.admin()) {
    out += "<div class=actions><form class=inline method=post action=/ui/scale>" + form_fields(v) +
           "<input type=hidden name=pool value=\"" + name +
           "\"><input type=number name=workers min=1 value=\"" + std::to_string(p.target_workers) +
           "\" aria-label=workers><button type=submit data-op=scale>Scale</button></form>";
    out += action_button(v, "drain", "Drain", {{"pool", p.name}});
    out += action_button(v, "resume", "Resume", {{"pool", p.name}});
    out += action_button(v, "restart", "Rolling restart", {{"pool", p.name}, {"rolling", "true"}});
    out += "</div>";
  }
  out +=
      "<h2>Workers</h2><table class=grid id=workers><thead><tr><th>slot</th><th>pid</th>"
      "<th>state</th><th>in flight</th><th>tasks done</th><th>RSS</th><th>CPU</th>"
      "<th>uptime</th><th>last beat</th><th>restarts</th><th>isolation</th>";
  if (v.admin()) out += "<th></th>";
  out += "</tr></thead><tbody>";
  for (const ops::WorkerStatus& w : workers.workers) {
    out += "<tr data-pid=\"" + std::to_string(w.pid) + "\"><td>" + std::to_string(w.slot) +
           "</td><td>" + std::to_string(w.pid) + "</td><td>" + escape(w.state) + "</td><td>" +
           std::to_string(w.in_flight) + "</td><td>" + num(w.tasks_done) + "</td><td>" +
           format_bytes(w.rss_bytes) + "</td><td>" + format_duration(w.cpu_ms) + "</td><td>" +
           format_duration(w.uptime_ms) + "</td><td>" +
           (w.last_beat_ms ? format_time(*w.last_beat_ms) : std::string("-")) + "</td><td>" +
           num(w.restarts) + "</td><td>" + escape(w.isolation) + "</td>";
    if (v.admin()) {
      out += "<td>" +
             action_button(v, "kill_worker", "Kill",
                           {{"pool", p.name}, {"pid", std::to_string(w.pid)}}, "danger") +
             "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  if (!p.tenants.empty()) {
    // The tenants with the most tasks waiting (queued or scheduled), most first.
    out +=
        "<h2>Tenants waiting</h2><table class=grid id=tenants><thead><tr><th>tenant</th>"
        "<th>waiting</th></tr></thead><tbody>";
    for (const ops::TenantWaiting& t : p.tenants) {
      const std::string label = t.tenant.empty() ? "(default)" : escape(t.tenant);
      out += "<tr data-tenant=\"" + escape(t.tenant) +
             "\"><td><a href=\"/tasks?pool=" + escape(url_encode(p.name)) +
             "&amp;tenant=" + escape(url_encode(t.tenant)) + "\">" + label + "</a></td><td>" +
             num(t.waiting) + "</td></tr>";
    }
    out += "</tbody></table>";
  }
  return out;
}

std::string tasks_body(const Viewer&, const TaskFilter& f, const ops::TaskListReply* list,
                       std::string_view error) {
  std::string out =
      "<h1>Tasks</h1><form method=get action=/tasks class=filters id=task-search>"
      "<label>id <input name=id inputmode=numeric value=\"" +
      escape(f.id) + "\"></label><label>pool <input name=pool value=\"" + escape(f.pool) +
      "\"></label><label>type <input name=type value=\"" + escape(f.type) +
      "\"></label><label>state <select name=state>";
  for (const char* s : {"", "scheduled", "queued", "dispatched", "running", "retry_wait",
                        "completed", "dead_lettered", "cancelled"}) {
    out += "<option value=\"" + std::string(s) + "\"" + (f.state == s ? " selected" : "") + ">" +
           (*s ? s : "any state") + "</option>";
  }
  out += "</select></label><label>tenant <input name=tenant value=\"" + escape(f.tenant) +
         "\"></label><label>key <input name=key value=\"" + escape(f.key) +
         "\"></label><label>since <select name=since>";
  for (const char* s : {"", "15m", "1h", "24h", "7d"}) {
    out += "<option value=\"" + std::string(s) + "\"" + (f.since == s ? " selected" : "") + ">" +
           (*s ? s : "any time") + "</option>";
  }
  out += "</select></label><button type=submit>Find</button></form>";
  if (list == nullptr) return out + "<p class=error>" + escape(error) + "</p>";
  out +=
      "<table class=grid id=tasks><thead><tr><th>id</th><th>pool</th><th>tenant</th>"
      "<th>type</th><th>state</th><th>attempts</th><th>key</th><th>submitted</th>"
      "<th>error</th></tr></thead><tbody>";
  for (const ops::TaskSummary& t : list->tasks) {
    // A scheduled task says when it is due (UTC, as every time here).
    const std::string due =
        t.state == "scheduled" && t.not_before_ms
            ? " <span class=muted data-k=due>due " + format_time(*t.not_before_ms) + "</span>"
            : "";
    out += "<tr data-task=\"" + num(t.id) + "\"><td><a href=\"/tasks/" + num(t.id) + "\">" +
           num(t.id) + "</a></td><td>" + escape(t.pool) + "</td><td data-k=tenant>" +
           escape(t.tenant) + "</td><td>" + escape(t.type) + "</td><td data-k=state>" +
           escape(t.state) + (t.reason ? " (" + escape(*t.reason) + ")" : "") + due + "</td><td>" +
           std::to_string(t.attempts) + "</td><td>" + escape(t.key) + "</td><td>" +
           format_time(t.submitted_ms) + "</td><td>" + escape(t.error) + "</td></tr>";
  }
  out += "</tbody></table>";
  if (list->tasks.empty()) out += "<p class=muted id=no-tasks>No task matches.</p>";
  if (list->truncated) out += "<p class=muted>More match: narrow the search.</p>";
  return out +
         "<p class=muted>The tasks the pools hold: open ones, and ended ones while kept "
         "(service.task_records_*). A task of an earlier run is found by its id; failed ones "
         "are on <a href=/dlq>Dead letters</a>.</p>";
}

std::string task_body(const Viewer& v, const ops::TaskAccount& t,
                      const std::optional<std::string>& result) {
  std::string out = "<h1>Task " + num(t.id) + "</h1><dl class=facts><dt>type</dt><dd>" +
                    escape(t.type) + "</dd><dt>state</dt><dd id=task-state>" + escape(t.state) +
                    "</dd>";
  if (t.reason) out += "<dt>reason</dt><dd>" + escape(*t.reason) + "</dd>";
  if (!t.error.empty()) out += "<dt>error</dt><dd>" + escape(t.error) + "</dd>";
  out += "<dt>attempts</dt><dd>" + std::to_string(t.attempts) + "</dd></dl>";
  const bool terminal = t.state == "completed" || t.state == "dead_lettered" ||
                        t.state == "cancelled" || t.state == "expired";
  if (v.admin() && !terminal) {
    out += "<div class=actions>" + action_button(v, "cancel", "Cancel", {{"id", num(t.id)}}) +
           "</div>";
  }
  out += "<h2>Attempts</h2>" + attempts_table(t.history);
  out += bytes_preview(v, "Result", result, t.result_withheld);
  if (t.submitted) out += submission_facts(v, *t.submitted);
  return out;
}

std::string dlq_body(const Viewer& v, const LetterFilter& f, const ops::DlqListReply& list) {
  std::string out =
      "<h1>Dead letters</h1><form method=get action=/dlq class=filters>"
      "<label>pool <input name=pool value=\"" +
      escape(f.pool) + "\"></label><label>type <input name=type value=\"" + escape(f.type) +
      "\"></label><label>reason <input name=reason value=\"" + escape(f.reason) +
      "\"></label><label>since <select name=since>";
  for (const char* s : {"", "15m", "1h", "24h", "7d"}) {
    out += "<option value=\"" + std::string(s) + "\"" + (f.since == s ? " selected" : "") + ">" +
           (*s ? s : "any time") + "</option>";
  }
  out += "</select></label><label>text <input name=text value=\"" + escape(f.text) +
         "\"></label><button type=submit>Filter</button></form>";
  const bool admin = v.admin();
  if (admin) {
    out += "<form method=post action=/ui/dlq id=dlq-form>" + form_fields(v);
    for (const auto& [k, val] : {std::pair{"pool", &f.pool}, std::pair{"type", &f.type},
                                 std::pair{"reason", &f.reason}, std::pair{"since", &f.since}}) {
      out += "<input type=hidden name=\"f_" + std::string(k) + "\" value=\"" + escape(*val) + "\">";
    }
    out +=
        "<div class=actions><button type=submit name=action value=replay_selected "
        "data-op=replay-selected>Replay selected</button><button type=submit name=action "
        "value=purge_selected class=danger>Purge selected</button><button type=submit "
        "name=action value=replay_matching>Replay all matching</button><button type=submit "
        "name=action value=purge_matching class=danger>Purge all matching</button></div>";
  }
  out +=
      "<table class=grid id=letters><thead><tr><th></th><th>letter</th><th>task</th>"
      "<th>pool</th><th>type</th><th>reason</th><th>error</th><th>attempts</th>"
      "<th>dead-lettered</th><th>payload</th></tr></thead><tbody>";
  std::size_t shown = 0;
  for (const ops::DeadLetterEntry& e : list.entries) {
    if (!f.text.empty() && e.task.error.find(f.text) == std::string::npos &&
        e.task.type.find(f.text) == std::string::npos) {
      continue;
    }
    ++shown;
    out += "<tr data-letter=\"" + num(e.letter_id) + "\"><td>" +
           (admin ? "<input type=checkbox name=id value=\"" + num(e.letter_id) +
                        "\" aria-label=select>"
                  : std::string()) +
           "</td><td><a href=\"/dlq/" + num(e.letter_id) + "\">" + num(e.letter_id) +
           "</a></td><td><a href=\"/tasks/" + num(e.task.id) + "\">" + num(e.task.id) +
           "</a></td><td>" + escape(e.pool) + "</td><td>" + escape(e.task.type) + "</td><td>" +
           escape(e.task.reason.value_or("")) + "</td><td>" + escape(e.task.error) + "</td><td>" +
           std::to_string(e.task.attempts) + "</td><td>" + format_time(e.dead_lettered_ms) +
           "</td><td>" + format_bytes(e.payload_bytes) + "</td></tr>";
  }
  out += "</tbody></table>";
  if (admin) out += "</form>";
  if (shown == 0) out += "<p class=muted id=no-letters>No dead letter matches.</p>";
  if (list.next_cursor) {
    out += "<p><a href=\"/dlq?pool=" + escape(url_encode(f.pool)) +
           "&amp;type=" + escape(url_encode(f.type)) +
           "&amp;reason=" + escape(url_encode(f.reason)) +
           "&amp;since=" + escape(url_encode(f.since)) + "&amp;text=" + escape(url_encode(f.text)) +
           "&amp;cursor=" + escape(url_encode(*list.next_cursor)) + "\">Next page</a></p>";
  }
  return out;
}

std::string letter_body(const Viewer& v, const ops::DlqShowReply& r,
                        const std::optional<std::string>& payload) {
  const ops::DeadLetterEntry& e = r.letter;
  std::string out =
      "<h1>Dead letter " + num(e.letter_id) + "</h1><dl class=facts>" +
      "<dt>task</dt><dd><a href=\"/tasks/" + num(e.task.id) + "\">" + num(e.task.id) +
      "</a></dd><dt>pool</dt><dd>" + escape(e.pool) + "</dd><dt>type</dt><dd>" +
      escape(e.task.type) + "</dd><dt>reason</dt><dd>" + escape(e.task.reason.value_or("")) +
      "</dd><dt>error</dt><dd>" + escape(e.task.error) + "</dd><dt>dead-lettered</dt><dd>" +
      format_time(e.dead_lettered_ms) + "</dd><dt>options</dt><dd>priority " +
      std::to_string(r.options.priority) + ", key \"" + escape(r.options.key) + "\"" +
      (r.options.timeout ? ", timeout " + format_duration(r.options.timeout->count())
                         : std::string()) +
      (r.options.retries ? ", retries " + std::to_string(*r.options.retries) : std::string()) +
      "</dd></dl>";
  if (v.admin()) {
    out += "<div class=actions>" +
           action_button(v, "dlq_replay", "Replay", {{"id", num(e.letter_id)}}) +
           action_button(v, "dlq_purge", "Purge", {{"id", num(e.letter_id)}}, "danger") + "</div>";
  }
  out += "<h2>Attempts</h2>" + attempts_table(e.task.history);
  out += bytes_preview(v, "Payload", payload, false);
  return out;
}

std::string events_body(const Viewer&, std::string_view pool,
                        const std::vector<ops::PoolEventRecord>& recent) {
  std::string out =
      "<h1>Events</h1><form method=get action=/events class=inline><label>pool <input "
      "name=pool value=\"" +
      escape(pool) +
      "\"></label><button type=submit>Filter</button></form><p class=muted id=live-note>The "
      "recent events; with JavaScript on, new ones appear as they happen.</p>"
      "<table class=grid id=events data-pool=\"" +
      escape(pool) +
      "\"><thead><tr><th>time</th><th>pool</th><th>event</th><th>pid</th><th>task</th>"
      "<th>outcome / state</th><th>detail</th></tr></thead><tbody>";
  for (auto it = recent.rbegin(); it != recent.rend(); ++it) {
    const ops::PoolEventRecord& e = *it;
    out += "<tr><td>" + format_time(e.time_ms) + "</td><td>" + escape(e.pool) + "</td><td>" +
           escape(e.event) + "</td><td>" + (e.pid ? std::to_string(*e.pid) : "") + "</td><td>" +
           (e.task_id ? "<a href=\"/tasks/" + num(*e.task_id) + "\">" + num(*e.task_id) + "</a>"
                      : std::string()) +
           "</td><td>" + escape(e.outcome.value_or(e.state.value_or(""))) + "</td><td>" +
           escape(e.reason.value_or(e.detail.value_or(""))) + "</td></tr>";
  }
  return out + "</tbody></table>";
}

std::string schedules_body(const Viewer& v, const std::vector<ScheduleRow>& rows) {
  std::string out =
      "<h1>Schedules</h1><table class=grid id=schedules><thead><tr><th>schedule</th>"
      "<th>when</th><th>task</th><th>next run</th><th>last slot</th><th>last outcome</th>"
      "<th>fired</th><th>skipped</th><th>paused</th>";
  if (v.admin()) out += "<th></th>";
  out += "</tr></thead><tbody>";
  for (const ScheduleRow& r : rows) {
    const ops::ScheduleInfo& s = r.info;
    std::string task = escape(s.type) + " <span class=muted>to " +
                       (s.pool.empty() ? std::string("its type's pool") : escape(s.pool)) +
                       (s.tenant.empty() ? "" : ", tenant " + escape(s.tenant)) + "</span>";
    std::string next = s.next_s ? format_time(*s.next_s * 1000) : s.paused ? "paused" : "none";
    if (s.held_slot_s) next += " (held: " + format_time(*s.held_slot_s * 1000) + ")";
    std::string last = "-";
    if (s.last_slot_s) {
      last = format_time(*s.last_slot_s * 1000);
      if (s.last_task) {
        last += ", task <a href=\"/tasks/" + num(*s.last_task) + "\">" + num(*s.last_task) +
                "</a> <span data-k=last_state>" +
                (r.last_state ? escape(*r.last_state) : std::string("(not held any more)")) +
                "</span>";
      }
    }
    out += "<tr data-schedule=\"" + escape(s.name) + "\"><td data-k=name>" + escape(s.name) +
           "</td><td><code>" + escape(s.expression) + "</code> " + escape(s.zone) +
           "</td><td data-k=task>" + task + "</td><td data-k=next>" + next +
           "</td><td data-k=last>" + last + "</td><td data-k=outcome>" +
           escape(s.last_outcome.empty() ? "-" : s.last_outcome) + "</td><td data-k=fired>" +
           num(s.fired) + "</td><td data-k=skipped>" + num(s.skipped) + "</td><td data-k=paused>" +
           (s.paused ? "yes" : "no") + "</td>";
    if (v.admin()) {
      out += "<td>" +
             (s.paused ? action_button(v, "schedule_resume", "Resume", {{"name", s.name}})
                       : action_button(v, "schedule_pause", "Pause", {{"name", s.name}})) +
             action_button(v, "schedule_run_now", "Run now", {{"name", s.name}}) + "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  if (rows.empty()) {
    out +=
        "<p class=muted id=no-schedules>No schedule: declare them in the YAML's "
        "<code>schedules:</code> or add one (<code>poolctl schedule add</code>).</p>";
  }
  return out +
         "<p class=muted>Times are UTC. Fired and skipped count this node's slots since poold "
         "started; a slot another node of a Redis pool claimed is neither (docs/schedules.md)."
         "</p>";
}

}  // namespace sandpool::http::pages
