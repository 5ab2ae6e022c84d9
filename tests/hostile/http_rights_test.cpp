// Who may read and change what over HTTP (docs/security.md, "The HTTP listener", steps 3 and
// 4, "Sessions and the login"): default-deny reads once tokens are configured, a foreign Host
// (DNS rebinding) and a foreign Origin, the session cookie's name and idle expiry, the
// login's rules, the session caps, a form's return path and the headers every response
// carries.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "http_attack.hpp"

namespace sandpool::testing::http_attack {
namespace {

using nlohmann::json;

int get_status(const Target& t, const std::string& path, const std::string& headers = "") {
  const auto r = round_trip(t.port, request_head("GET", path, t.port, headers));
  return r ? r->status : 0;
}

TEST_CASE("http: with tokens configured an anonymous read is 401, /healthz and /metrics 200") {
  Target t;
  const Baseline before(t);
  for (const char* path :
       {"/api/v1/stats", "/api/v1/status", "/api/v1/pools", "/api/v1/pools/echo/workers",
        "/api/v1/tasks", "/api/v1/tasks/1", "/api/v1/events?follow=false"}) {
    INFO("GET " << path);
    CHECK(get_status(t, path) == 401);
    CHECK(get_status(t, path, bearer(kReadToken)) != 401);
  }
  CHECK(get_status(t, "/healthz") == 200);
  CHECK(get_status(t, "/metrics") == 200);
  CHECK(get_status(t, "/login") == 200);
  CHECK(get_status(t, "/static/app.css") == 200);
  check_unharmed(t, before, 16);
}

TEST_CASE("http: metrics_access: read puts /metrics behind the read token") {
  Target t(", metrics_access: read");
  CHECK(get_status(t, "/metrics") == 401);
  CHECK(get_status(t, "/metrics", bearer(kReadToken)) == 200);
  CHECK(get_status(t, "/metrics", bearer(kAdminToken)) == 200);
  CHECK(get_status(t, "/healthz") == 200);
}

// An IP literal is accepted whatever it says (docs/security.md: DNS rebinding needs the
// attacker's DNS name in Host).
TEST_CASE("http: a Host naming neither an address, localhost nor service.http.hosts is 421") {
  Target t;
  const Baseline before(t);
  const std::string port = std::to_string(t.port);
  for (const std::string& host : std::vector<std::string>{"evil.example", "evil.example:" + port,
                                                          "localhost.evil.example:" + port,
                                                          "127.0.0.1.evil.example:" + port}) {
    INFO("Host: " << host);
    const auto r = round_trip(t.port, "GET /api/v1/status HTTP/1.1\r\nHost: " + host + "\r\n" +
                                          bearer(kReadToken) + "\r\n");
    REQUIRE(r);
    CHECK(r->status == 421);
    CHECK(r->body.find("\"pools\"") == std::string::npos);
  }
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "localhost:" + port, "127.0.0.2:" + port}) {
    INFO("Host: " << host);
    const auto r = round_trip(t.port, "GET /api/v1/status HTTP/1.1\r\nHost: " + host + "\r\n" +
                                          bearer(kReadToken) + "\r\n");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  check_unharmed(t, before, 16);
}

TEST_CASE("http: a name in service.http.hosts is accepted as the Host") {
  Target t(", hosts: [poold.internal]");
  const auto r = round_trip(
      t.port, "GET /api/v1/status HTTP/1.1\r\nHost: poold.internal:" + std::to_string(t.port) +
                  "\r\n" + bearer(kReadToken) + "\r\n");
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("http: a POST whose Origin is another origin is 403 and changes nothing") {
  Target t;
  const Baseline before(t);
  const std::string other_port = "127.0.0.1:" + std::to_string(t.port + 1);
  for (const std::string& cross : std::vector<std::string>{
           "Origin: http://evil.example\r\n", "Origin: http://" + other_port + "\r\n",
           "Origin: null\r\n", "Sec-Fetch-Site: cross-site\r\n"}) {
    INFO(cross);
    const auto r = round_trip(
        t.port, json_post(t, "/api/v1/pools/echo/drain", "{}", bearer(kAdminToken) + cross));
    REQUIRE(r);
    CHECK(r->status == 403);
    CHECK(submit_status(t) == 200);  // not drained
  }
  // The listener's own origin is no reason to refuse.
  const auto same =
      round_trip(t.port, json_post(t, "/api/v1/pools/echo/drain", "{}",
                                   bearer(kAdminToken) + "Origin: http://" + t.host() + "\r\n"));
  REQUIRE(same);
  CHECK(same->status == 200);
  CHECK(submit_status(t) == 503);  // drained
  check_unharmed(t, before, 16);
}

TEST_CASE("http: the session cookie is named with the port and ends after session_idle_timeout") {
  Target t(", session_idle_timeout: 2s");
  const auto s = log_in(t, kAdminToken);
  REQUIRE(s);
  INFO(s->set_cookie);
  const std::string name = "sp_session_" + std::to_string(t.port);
  CHECK(s->cookie.rfind(name + "=", 0) == 0);
  CHECK(s->set_cookie.find("HttpOnly") != std::string::npos);
  CHECK(s->set_cookie.find("SameSite=Strict") != std::string::npos);
  CHECK(s->set_cookie.find("Path=/") != std::string::npos);
  CHECK(get_status(t, "/api/v1/dlq", "Cookie: " + s->cookie + "\r\n") == 200);
  // The session's id under another listener's name is nobody's session.
  const std::string id = s->cookie.substr(s->cookie.find('=') + 1);
  CHECK(get_status(t, "/api/v1/dlq", "Cookie: sp_session=" + id + "\r\n") == 401);
  CHECK(get_status(t, "/api/v1/dlq",
                   "Cookie: sp_session_" + std::to_string(t.port + 1) + "=" + id + "\r\n") == 401);
  // Time itself is what is tested: the idle timeout passing with no request.
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  CHECK(get_status(t, "/api/v1/dlq", "Cookie: " + s->cookie + "\r\n") == 401);
}

TEST_CASE("http: a form's return path that a browser would take off-site redirects to /") {
  Target t;
  const auto s = log_in(t, kAdminToken);
  REQUIRE(s);
  REQUIRE(!s->csrf.empty());
  const std::string back =
      GENERATE(as<std::string>(), "/%09/evil.example", "//evil.example", "/%5Cevil.example",
               "%2F%2Fevil.example", "http://evil.example/", "/%0D%0ALocation:%20x", "/%20/x");
  INFO("return=" << back);
  const auto r = round_trip(
      t.port,
      form_post(t, "/ui/resume", "pool=echo&csrf=" + s->csrf + "&return=" + back, s->cookie));
  REQUIRE(r);
  CHECK(r->status == 303);
  const std::string location = r->header("location");
  INFO("Location: " << location);
  CHECK(location.substr(0, location.find('?')) == "/");
  // A local path is kept.
  const auto kept = round_trip(
      t.port,
      form_post(t, "/ui/resume", "pool=echo&csrf=" + s->csrf + "&return=/pools/echo", s->cookie));
  REQUIRE(kept);
  CHECK(kept->header("location").rfind("/pools/echo?", 0) == 0);
}

TEST_CASE("http: a token in the login URL is 400, and the 11th failed login a minute is 429") {
  Target t;
  const Baseline before(t);
  // From an address of its own, so that the failures below start from none whether or not
  // poold counts this one.
  const auto in_url =
      round_trip(t.port, form_post(t, "/login?token=" + std::string(kAdminToken), "", ""),
                 milliseconds(10000), "127.0.0.5");
  REQUIRE(in_url);
  CHECK(in_url->status == 400);
  CHECK(in_url->header("set-cookie").empty());
  for (int i = 0; i < 10; ++i) {
    const auto wrong =
        round_trip(t.port, form_post(t, "/login", "token=not-the-token-" + std::to_string(i), ""));
    REQUIRE(wrong);
    CHECK(wrong->status == 401);
  }
  const auto limited = round_trip(t.port, form_post(t, "/login", "token=not-the-token-10", ""));
  REQUIRE(limited);
  CHECK(limited->status == 429);
  CHECK(!limited->header("retry-after").empty());
  check_unharmed(t, before, 16);
}

TEST_CASE("http: 300 read-token logins leave an admin's session valid") {
  Target t;
  const auto admin = log_in(t, kAdminToken);
  REQUIRE(admin);
  for (int i = 0; i < 300; ++i) {
    const std::string form = "token=" + std::string(kReadToken);
    const auto r = round_trip(t.port, form_post(t, "/login", form, ""));
    REQUIRE(r);
    REQUIRE(r->status == 303);
  }
  CHECK(get_status(t, "/api/v1/dlq", "Cookie: " + admin->cookie + "\r\n") == 200);
  const auto drain = round_trip(
      t.port, json_post(t, "/api/v1/pools/echo/drain", "{}",
                        "Cookie: " + admin->cookie + "\r\nX-CSRF-Token: " + admin->csrf + "\r\n"));
  REQUIRE(drain);
  CHECK(drain->status == 200);
}

// Checks the headers docs/security.md has every response carry (`csp_none`: the policy must
// hold default-src 'none', as for the API, streams and errors; frame-ancestors 'none' is on
// every one, pages included).
void check_security_headers(const Response& r, bool csp_none) {
  CHECK(r.header("x-content-type-options") == "nosniff");
  CHECK(r.header("referrer-policy") == "same-origin");
  CHECK(r.header("cache-control") == "no-store");
  const std::string csp = r.header("content-security-policy");
  CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
  if (csp_none) CHECK(csp.find("default-src 'none'") != std::string::npos);
}

TEST_CASE(
    "http: API replies, an event stream, a refused form and a page carry the security "
    "headers") {
  Target t;
  SECTION("an API reply") {
    const auto r =
        round_trip(t.port, request_head("GET", "/api/v1/status", t.port, bearer(kReadToken)));
    REQUIRE(r);
    CHECK(r->status == 200);
    check_security_headers(*r, true);
  }
  SECTION("an API error") {
    const auto r =
        round_trip(t.port, request_head("GET", "/api/v1/no_such_op", t.port, bearer(kReadToken)));
    REQUIRE(r);
    CHECK(r->status == 404);
    check_security_headers(*r, true);
  }
  SECTION("an event stream") {
    const auto r = round_trip(
        t.port, request_head("GET", "/api/v1/events?follow=false", t.port, bearer(kReadToken)));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->header("content-type").find("text/event-stream") != std::string::npos);
    check_security_headers(*r, true);
  }
  SECTION("a dashboard page") {
    const auto r = round_trip(t.port, request_head("GET", "/", t.port, bearer(kReadToken)));
    REQUIRE(r);
    CHECK(r->status == 200);
    check_security_headers(*r, false);
  }
  // Refused at admission (the route's rights), before the dashboard's Refused page could be.
  SECTION("a read session's form, refused") {
    const auto s = log_in(t, kReadToken);
    REQUIRE(s);
    const auto r =
        round_trip(t.port, form_post(t, "/ui/drain", "pool=echo&csrf=" + s->csrf, s->cookie));
    REQUIRE(r);
    CHECK(r->status == 403);
    check_security_headers(*r, true);
  }
}

}  // namespace
}  // namespace sandpool::testing::http_attack
