// Requests that would hold poold's serving threads, descriptors or stream slots (docs/
// security.md, "The HTTP listener", steps 1, 2, 7 and 8): a wait with no timeout on a task
// that does not end, POST /ui/events with follow=true (once, then thirty of them), slowloris,
// more connections than max_connections or one client's cap, and read-token event streams
// reaching for the slots kept for admins. While each holds what it can, /healthz answers
// within a second.
#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "http_attack.hpp"

namespace sandpool::testing::http_attack {
namespace {

using nlohmann::json;

// The time from now to `deadline`, or none once it passed.
milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(0),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// The id of an echo task due in an hour: a wait on it ends only by a timeout.
std::string task_due_in_an_hour(const Target& t) {
  const json later =
      body_of(t.client(kAdminToken)
                  .Post("/api/v1/pools/echo/tasks",
                        json{{"type", "echo"}, {"payload", "x"}, {"delay_ms", 3600000}}.dump(),
                        "application/json"));
  return std::to_string(later["id"].get<std::uint64_t>());
}

TEST_CASE("http: a wait without timeout_ms on a task that never ends answers by max_wait") {
  Target t(", max_wait: 1s");
  const Baseline before(t);
  const std::string id = task_due_in_an_hour(t);
  // No timeout (the default is max_wait), and one under a day but over max_wait (capped).
  const std::string query = GENERATE(as<std::string>(), "", "?timeout_ms=600000");
  INFO("GET /api/v1/tasks/" << id << "/wait" << query);
  RawHttp c(t.port);
  REQUIRE(c.connected());
  const auto start = Clock::now();
  REQUIRE(c.send(
      request_head("GET", "/api/v1/tasks/" + id + "/wait" + query, t.port, bearer(kReadToken))));
  CHECK(healthz_within(t.port) == 200);  // while the wait holds its request
  const auto r = c.response(milliseconds(15000));
  REQUIRE(r);  // none in 15 s: the wait had no bound
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  CHECK(r->status == 200);
  CHECK(json_field(r->body, "state") == "scheduled");  // as it is then: the task goes on
  check_unharmed(t, before, 16);
}

// POST /ui/events?follow=true as a page would send it: no cookie, no CSRF token.
std::string ui_events_post(const Target& t) {
  return request_head("POST", "/ui/events?follow=true", t.port,
                      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                          std::to_string(std::string("follow=true").size()) + "\r\n") +
         "follow=true";
}

TEST_CASE("http: POST /ui/events with follow=true and no cookie is refused at once") {
  Target t;
  const Baseline before(t);
  RawHttp c(t.port);
  REQUIRE(c.connected());
  REQUIRE(c.send(ui_events_post(t)));
  const auto r = c.response(milliseconds(5000));
  REQUIRE(r);  // none in 5 s: poold holds it as a stream
  INFO(r->body);
  CHECK(r->status >= 400);
  CHECK(r->status < 500);
  CHECK(r->header("content-type").find("text/event-stream") == std::string::npos);
  check_unharmed(t, before, 16);
}

TEST_CASE("http: thirty POST /ui/events held open leave /healthz answering within 1 s") {
  Target t;
  const Baseline before(t);
  std::vector<std::unique_ptr<RawHttp>> held;
  for (int i = 0; i < 30; ++i) {
    held.push_back(std::make_unique<RawHttp>(t.port));
    REQUIRE(held.back()->connected());
    REQUIRE(held.back()->send(ui_events_post(t)));
  }
  CHECK(healthz_within(t.port) == 200);
  // The API answers too (its threads are not held by the thirty).
  const auto status =
      round_trip(t.port, request_head("GET", "/api/v1/status", t.port, bearer(kReadToken)),
                 milliseconds(5000));
  REQUIRE(status);
  CHECK(status->status == 200);
  check_unharmed(t, before, 32);
}

TEST_CASE(
    "http: slowloris: a header byte a second on 100 connections, each closed by the "
    "header timeout") {
  Target t(", header_timeout: 2s");
  const Baseline before(t);
  std::vector<std::unique_ptr<RawHttp>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<RawHttp>(t.port));
    REQUIRE(slow.back()->connected());
  }
  const std::string head = request_head("GET", "/api/v1/version", t.port, bearer(kReadToken));
  const auto start = Clock::now();
  std::size_t at = 0;
  std::size_t open = slow.size();
  int healthz_checks = 0;
  // A byte a second on each open connection, until poold has closed them all (or 15 s).
  while (open > 0 && Clock::now() - start < std::chrono::seconds(15) && at < head.size()) {
    open = 0;
    for (auto& c : slow) {
      if (c->readable()) continue;  // answered or closed
      ++open;
      (void)c->send(head.substr(at, 1), milliseconds(100));
    }
    ++at;
    if (healthz_checks < 3) {
      CHECK(healthz_within(t.port) == 200);
      ++healthz_checks;
    }
    // The attack's pace, a byte a second; nothing waits on poold here.
    std::this_thread::sleep_until(start + std::chrono::seconds(at));
  }
  std::size_t closed = 0;
  for (auto& c : slow) closed += c->closed_within(milliseconds(0)) ? 1 : 0;
  INFO(closed << " of 100 closed after "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - start).count() << " ms");
  CHECK(closed == 100);
  CHECK(Clock::now() - start < std::chrono::seconds(10));  // header_timeout 2 s, not their pace
  check_unharmed(t, before, 16);
}

TEST_CASE("http: past max_connections idle connections give way and /healthz is served") {
  Target t(", max_connections: 32");
  const Baseline before(t);
  std::vector<std::unique_ptr<RawHttp>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<RawHttp>(t.port));
    REQUIRE(idle.back()->connected());
  }
  CHECK(healthz_within(t.port) == 200);
  CHECK(healthz_within(t.port) == 200);
  // poold closed the idle ones beyond its cap (the oldest first); those it keeps wait out
  // one shared second, not one each.
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  std::size_t closed = 0;
  for (auto& c : idle) closed += c->closed_within(left_until(deadline)) ? 1 : 0;
  CHECK(closed >= 100 - 32);
  check_unharmed(t, before, 16);
}

TEST_CASE("http: one client address holds at most max_connections_per_client, others get in") {
  Target t(", max_connections_per_client: 16");
  const Baseline before(t);
  std::vector<std::unique_ptr<RawHttp>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<RawHttp>(t.port, "127.0.0.2"));
    REQUIRE(idle.back()->connected());
  }
  CHECK(healthz_within(t.port, milliseconds(1000), "127.0.0.3") == 200);
  CHECK(healthz_within(t.port, milliseconds(1000), "127.0.0.2") == 200);
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  std::size_t closed = 0;
  for (auto& c : idle) closed += c->closed_within(left_until(deadline)) ? 1 : 0;
  CHECK(closed >= 40 - 16);
  check_unharmed(t, before, 16);
}

TEST_CASE("http: read-token event streams cannot take the slots kept for admins") {
  Target t;  // max_streams 8, admin_reserved_streams 2: the defaults
  const Baseline before(t);
  const std::string read = bearer(kReadToken);
  std::vector<std::unique_ptr<SseReader>> streams;
  int read_opened = 0;
  for (int i = 0; i < 8; ++i) {
    auto s = std::make_unique<SseReader>(t.port, "/api/v1/events", read);
    const int status = s->status();
    if (status != 200) {
      CHECK((status == 429 || status == 503));
      break;
    }
    ++read_opened;
    streams.push_back(std::move(s));
  }
  CHECK(read_opened == 6);
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::make_unique<SseReader>(t.port, "/api/v1/events", bearer(kAdminToken)));
    CHECK(streams.back()->status() == 200);
  }
  CHECK(healthz_within(t.port) == 200);
  check_unharmed(t, before, 16);
}

}  // namespace
}  // namespace sandpool::testing::http_attack
