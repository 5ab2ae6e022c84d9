// The dashboard's pages from a real poold, read as a browser with JavaScript off would: each
// page answers 200 and shows what poold holds, a value from a task or a schedule is escaped,
// the forms carry the session's CSRF token, and actions are absent without the admin token
// (and refused: a read session's form post is 403).
#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <thread>

#include "http_test_support.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;
using namespace http_support;

// The Cookie header of a session logged in with `token`, and the page's CSRF token.
std::pair<httplib::Headers, std::string> pages_login(HttpFixture& f, const std::string& token) {
  auto c = f.client();
  auto login = c.Post("/login", "token=" + token, "application/x-www-form-urlencoded");
  REQUIRE(login);
  const std::string cookie = login->get_header_value("Set-Cookie");
  httplib::Headers h = {{"Cookie", cookie.substr(0, cookie.find(';'))}};
  auto page = c.Get("/", h);
  REQUIRE(page);
  std::smatch m;
  REQUIRE(
      std::regex_search(page->body, m, std::regex(R"(<meta name=csrf content="([0-9a-f]+)\")")));
  return {h, m[1]};
}

TEST_CASE("pages: every page answers and shows what poold holds, task values escaped") {
  HttpFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("fail", "fail"));
  auto admin = f.client(kAdminToken);
  const std::string hostile = "<script>alert(1)</script>";
  const json done = body_of(admin.Post(
      "/api/v1/pools/echo/tasks",
      json{{"type", "echo"}, {"payload", hostile}, {"wait", true}}.dump(), "application/json"));
  const std::string id = std::to_string(done["id"].get<std::uint64_t>());
  (void)body_of(admin.Post("/api/v1/pools/fail/tasks",
                           json{{"type", "fail"}, {"payload", hostile}, {"wait", true}}.dump(),
                           "application/json"));
  const auto [cookie, csrf] = pages_login(f, kAdminToken);
  auto c = f.client();

  for (const std::string& path :
       std::vector<std::string>{"/", "/pools/echo", "/tasks", "/tasks/" + id, "/dlq", "/events",
                                "/login", "/static/app.js", "/static/app.css"}) {
    INFO(path);
    auto page = c.Get(path, cookie);
    REQUIRE(page);
    CHECK(page->status == 200);
    CHECK(page->body.find("<script>alert") == std::string::npos);
  }
  auto overview = c.Get("/", cookie);
  CHECK(overview->body.find("data-pool=\"echo\"") != std::string::npos);
  auto task = c.Get("/tasks/" + id, cookie);
  CHECK(task->body.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(task->body.find("completed") != std::string::npos);
  auto letters = c.Get("/dlq?pool=fail", cookie);
  CHECK(letters->body.find("&lt;script&gt;") != std::string::npos);
  CHECK(letters->body.find("value=\"" + csrf + "\"") != std::string::npos);
  auto find = c.Get("/tasks?id=" + id, cookie);
  REQUIRE(find);
  CHECK(find->status == 303);
  CHECK(find->get_header_value("Location") == "/tasks/" + id);
  auto events = c.Get("/events?pool=echo", cookie);
  CHECK(events->body.find("task_ended") != std::string::npos);
  auto missing = c.Get("/tasks/99999", cookie);
  REQUIRE(missing);
  CHECK(missing->status == 404);
}

TEST_CASE("pages: without a token the pages show states and counts, no payload and no action") {
  // A loopback listener with no token at all: the one place anonymous viewers read.
  HttpFixture f("pools:\n" + pool_yaml("echo", "echo") + pool_yaml("fail", "fail"),
                /*admin_token=*/false, /*read_token=*/false);
  const json done = json::parse(
      f.poolctl({"--json", "submit", "echo", "secret-result", "--pool", "echo", "--wait"}));
  auto c = f.client();
  auto task = c.Get("/tasks/" + std::to_string(done["id"].get<std::uint64_t>()));
  REQUIRE(task);
  CHECK(task->status == 200);
  CHECK(task->body.find("secret-result") == std::string::npos);
  CHECK(task->body.find("log in") != std::string::npos);
  auto pool = c.Get("/pools/echo");
  REQUIRE(pool);
  CHECK(pool->body.find("data-op=kill_worker") == std::string::npos);
  CHECK(pool->body.find("data-op=\"kill_worker\"") == std::string::npos);
  auto letters = c.Get("/dlq");
  REQUIRE(letters);
  CHECK(letters->body.find("id=need-token") != std::string::npos);
  auto drain = c.Post("/ui/drain", "pool=echo&return=/", "application/x-www-form-urlencoded");
  REQUIRE(drain);
  CHECK(drain->status == 401);
  CHECK(body_of(c.Get("/api/v1/pools/echo/stats"))["pools"][0]["state"] == "running");
}

TEST_CASE("pages: a task's page shows what it was submitted with, its payload to the admin") {
  HttpFixture f("pools:\n" + pool_yaml("echo", "echo"));
  auto admin = f.client(kAdminToken);
  const std::string payload = std::string("<b>pay") + '\x01' + "load</b>";
  const json done = body_of(admin.Post("/api/v1/pools/echo/tasks",
                                       json{{"type", "echo"},
                                            {"payload", payload},
                                            {"priority", 3},
                                            {"retries", 2},
                                            {"timeout_ms", 5000},
                                            {"key", "k<1>"},
                                            {"wait", true}}
                                           .dump(),
                                       "application/json"));
  const std::string id = std::to_string(done["id"].get<std::uint64_t>());
  // The API: options to every reader, the payload's text to the admin only.
  const json mine = body_of(admin.Get("/api/v1/tasks/" + id));
  INFO(mine.dump());
  CHECK(mine["submitted"]["priority"] == 3);
  CHECK(mine["submitted"]["retries"] == 2);
  CHECK(mine["submitted"]["timeout_ms"] == 5000);
  CHECK(mine["submitted"]["key"] == "k<1>");
  CHECK(mine["submitted"]["payload_size"] == payload.size());
  CHECK(mine["submitted"]["payload_preview"] == "<b>pay\\x01load</b>");
  // With tokens configured an anonymous reader gets nothing (the tokenless listener's
  // anonymous view is the test above).
  auto anonymous = f.client();
  auto theirs = anonymous.Get("/api/v1/tasks/" + id);
  REQUIRE(theirs);
  CHECK(theirs->status == 401);
  // The page: escaped for HTML.
  const auto [cookie, csrf] = pages_login(f, kAdminToken);
  auto page = anonymous.Get("/tasks/" + id, cookie);
  REQUIRE(page);
  CHECK(page->body.find("Submitted with") != std::string::npos);
  CHECK(page->body.find("k&lt;1&gt;") != std::string::npos);
  CHECK(page->body.find("5000 ms") != std::string::npos);
  CHECK(page->body.find("&lt;b&gt;pay\\x01load&lt;/b&gt;") != std::string::npos);
  CHECK(page->body.find("<b>pay") == std::string::npos);
  auto hidden = anonymous.Get("/tasks/" + id);
  REQUIRE(hidden);
  CHECK(hidden->status == 303);
  CHECK(hidden->get_header_value("Location") == "/login");
}

}  // namespace
}  // namespace sandpool::testing

namespace sandpool::testing {

TEST_CASE("pages: the schedules page lists them, and pauses and resumes one for the admin only") {
  HttpFixture f("pools:\n" + pool_yaml("echo", "echo") +
                "schedules:\n  - {name: often, every: 2s, pool: echo, type: echo, payload: p}\n");
  auto admin = f.client(kAdminToken);
  // A schedule whose strings are markup: never run (03:00 on no day it reaches), only shown.
  const json hostile = body_of(admin.Post("/api/v1/schedule_add",
                                          json{{"name", "hostile"},
                                               {"cron", "0 3 * * *"},
                                               {"type", "<img src=x onerror=alert(1)>"},
                                               {"tenant", "<b>t</b>"},
                                               {"payload", "<script>alert(2)</script>"}}
                                              .dump(),
                                          "application/json"));
  CHECK(hostile["name"] == "hostile");
  auto shown = [&] { return json::parse(f.poolctl({"--json", "schedule", "show", "often"})); };
  REQUIRE(poll_until([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return shown()["fired"].get<std::uint64_t>() > 0;
  }));
  const std::uint64_t last_task = shown()["last_task"];

  const auto [admin_cookie, admin_csrf] = pages_login(f, kAdminToken);
  const auto [read_cookie, read_csrf] = pages_login(f, kReadToken);
  auto c = f.client();
  auto page = c.Get("/schedules", admin_cookie);
  REQUIRE(page);
  CHECK(page->status == 200);
  const std::string& body = page->body;
  CHECK(body.find("<tr data-schedule=\"often\">") != std::string::npos);
  CHECK(body.find("<tr data-schedule=\"hostile\">") != std::string::npos);
  CHECK(body.find("<a href=\"/tasks/" + std::to_string(last_task) + "\">") != std::string::npos);
  CHECK(body.find("data-k=last_state>") != std::string::npos);
  CHECK(body.find("<code>@every 2s</code>") != std::string::npos);
  CHECK(body.find("data-op=\"schedule_pause\"") != std::string::npos);
  CHECK(body.find("data-op=\"schedule_run_now\"") != std::string::npos);
  CHECK(body.find("value=\"" + admin_csrf + "\"") != std::string::npos);
  // Every string of a schedule escaped.
  CHECK(body.find("<img") == std::string::npos);
  CHECK(body.find("<b>t</b>") == std::string::npos);
  CHECK(body.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  CHECK(body.find("&lt;b&gt;t&lt;/b&gt;") != std::string::npos);
  CHECK(body.find("<script>alert") == std::string::npos);

  // The read token sees the schedules, no button, and its POST is refused and changes nothing.
  auto read_page = c.Get("/schedules", read_cookie);
  REQUIRE(read_page);
  CHECK(read_page->status == 200);
  CHECK(read_page->body.find("<tr data-schedule=\"often\">") != std::string::npos);
  CHECK(read_page->body.find("data-op=\"schedule_") == std::string::npos);
  for (const char* op : {"schedule_pause", "schedule_run_now"}) {
    INFO(op);
    auto refused = c.Post(std::string("/ui/") + op, read_cookie,
                          "name=often&csrf=" + read_csrf + "&return=/schedules",
                          "application/x-www-form-urlencoded");
    REQUIRE(refused);
    CHECK(refused->status == 403);
  }
  auto anonymous = c.Post("/ui/schedule_pause", "name=often&return=/schedules",
                          "application/x-www-form-urlencoded");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  CHECK(shown()["paused"] == false);

  // The admin's form pauses it, and the page then offers Resume.
  auto pause = c.Post("/ui/schedule_pause", admin_cookie,
                      "name=often&csrf=" + admin_csrf + "&return=/schedules",
                      "application/x-www-form-urlencoded");
  REQUIRE(pause);
  CHECK(pause->status == 303);
  CHECK_THAT(pause->get_header_value("Location"), Catch::StartsWith("/schedules?msg="));
  CHECK(shown()["paused"] == true);
  page = c.Get("/schedules", admin_cookie);
  REQUIRE(page);
  CHECK(page->body.find("data-op=\"schedule_resume\"") != std::string::npos);
  std::smatch row;
  REQUIRE(std::regex_search(page->body, row, std::regex(R"(<tr data-schedule="often">.*?</tr>)")));
  CHECK(row.str().find("<td data-k=paused>yes</td>") != std::string::npos);
  CHECK(row.str().find("<td data-k=next>paused</td>") != std::string::npos);
  auto resume = c.Post("/ui/schedule_resume", admin_cookie,
                       "name=often&csrf=" + admin_csrf + "&return=/schedules",
                       "application/x-www-form-urlencoded");
  REQUIRE(resume);
  CHECK(resume->status == 303);
  CHECK(shown()["paused"] == false);
  // Without the CSRF token, even the admin's session changes nothing.
  auto forged = c.Post("/ui/schedule_pause", admin_cookie, "name=often&return=/schedules",
                       "application/x-www-form-urlencoded");
  REQUIRE(forged);
  CHECK(forged->status == 403);
  CHECK(shown()["paused"] == false);
}

}  // namespace sandpool::testing
