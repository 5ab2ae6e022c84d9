// Requests that would grow poold without bound (docs/security.md, "The HTTP listener", steps
// 2, 4 and 5): a chunked anonymous body of 300 MB, an admin's chunked body over max_body, a
// POST without a length, a compressed body, a 64 KiB header line and a thousand headers.
// Each is refused with its status before poold holds what was sent.
#include <catch2/catch.hpp>

#include "http_attack.hpp"

namespace sandpool::testing::http_attack {
namespace {

using nlohmann::json;

constexpr std::size_t kMiB = 1u << 20;

// What sending a chunked body of `total` bytes did: the bytes sent when it stopped (the
// answer came, the server closed, or all was sent) and the answer.
struct ChunkedRun {
  std::size_t sent = 0;
  std::optional<Response> answer;
  int healthz_meanwhile = -1;  // /healthz's status halfway through the sending (-1: not asked)
};

// Sends `head` (announcing Transfer-Encoding: chunked), then chunks of zeros up to `total`
// bytes, stopping as soon as the server answers or closes. Halfway (if still sending), asks
// /healthz on another connection.
ChunkedRun send_chunked(int port, const std::string& head, std::size_t total) {
  RawHttp c(port);
  REQUIRE(c.connected());
  REQUIRE(c.send(head));
  ChunkedRun run;
  const std::size_t piece = 256 * 1024;
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece);
  const std::string chunk = size_line + std::string(piece, '\0') + "\r\n";
  while (run.sent < total) {
    if (c.readable()) break;
    if (!c.send(chunk, milliseconds(10000))) break;
    run.sent += piece;
    if (run.healthz_meanwhile < 0 && run.sent >= total / 2) {
      run.healthz_meanwhile = healthz_within(port);
    }
  }
  if (run.sent >= total) (void)c.send("0\r\n\r\n");
  run.answer = c.response(milliseconds(30000));
  return run;
}

TEST_CASE("http: an anonymous chunked body of 300 MB to /api/v1/shutdown is 401 before the body") {
  Target t;
  const Baseline before(t);
  const auto run =
      send_chunked(t.port,
                   request_head("POST", "/api/v1/shutdown", t.port,
                                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"),
                   300 * kMiB);
  INFO("sent " << run.sent / kMiB << " MiB before the answer");
  REQUIRE(run.answer);
  CHECK(run.answer->status == 401);
  CHECK(run.answer->header("connection") == "close");
  CHECK(run.sent < 64 * kMiB);  // answered before the body, not after reading it
  if (run.healthz_meanwhile >= 0) CHECK(run.healthz_meanwhile == 200);
  check_unharmed(t, before, 32);
}

TEST_CASE("http: an admin's chunked body over max_body is 413, cut where the bound is") {
  Target t(", max_body: 1MiB");
  const Baseline before(t);
  const std::string head = request_head(
      "POST", "/api/v1/pools/echo/tasks", t.port,
      bearer(kAdminToken) + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n");
  // A valid task whose payload runs on: {"type":"echo","payload":"000...
  RawHttp c(t.port);
  REQUIRE(c.connected());
  const std::string opening = R"({"type":"echo","payload":")";
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", opening.size());
  REQUIRE(c.send(head + size_line + opening + "\r\n"));
  const std::string chunk = "40000\r\n" + std::string(0x40000, '0') + "\r\n";
  std::size_t sent = 0;
  while (sent < 64 * kMiB && !c.readable() && c.send(chunk, milliseconds(10000))) {
    sent += 0x40000;
  }
  const auto r = c.response(milliseconds(10000));
  INFO("sent " << sent / kMiB << " MiB before the answer");
  REQUIRE(r);
  CHECK(r->status == 413);
  CHECK(sent < 32 * kMiB);
  CHECK(c.closed_within(milliseconds(5000)));
  check_unharmed(t, before, 32);
  const json stats = body_of(t.client(kAdminToken).Get("/api/v1/pools/echo/stats"));
  CHECK(stats["pools"][0]["submitted"] == 0);
}

TEST_CASE(
    "http: a POST with neither Content-Length nor chunked framing has no body, whatever "
    "follows it") {
  Target t;
  const Baseline before(t);
  RawHttp c(t.port);
  REQUIRE(c.connected());
  // What a server reading "until the connection closes" would take as the task's body: 8 MiB
  // of a JSON task. HTTP/1.1 gives this request no body, so it is read as the next request.
  (void)c.send(request_head("POST", "/api/v1/pools/echo/tasks", t.port,
                            bearer(kAdminToken) + "Content-Type: application/json\r\n") +
                   R"({"type":"echo","payload":")" + std::string(8u << 20, 'x') + "\"}",
               milliseconds(5000));
  const auto r = c.response(milliseconds(5000));
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status >= 400);  // a submit without arguments, or a refusal of the framing
  CHECK(r->status < 500);
  CHECK(c.closed_within(milliseconds(5000)));  // the rest was no request
  check_unharmed(t, before, 16);
  const json stats = body_of(t.client(kAdminToken).Get("/api/v1/pools/echo/stats"));
  CHECK(stats["pools"][0]["submitted"] == 0);
}

TEST_CASE("http: a body with Content-Encoding: gzip is 415, nothing decompressed or submitted") {
  Target t;
  const Baseline before(t);
  // The gzip of a small task header followed by zeros would expand far past max_body; the
  // bytes need not even be gzip: poold must refuse them unread.
  const std::string body = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + std::string(4096, 'x');
  const auto r = round_trip(t.port, json_post(t, "/api/v1/pools/echo/tasks", body,
                                              bearer(kAdminToken) + "Content-Encoding: gzip\r\n"));
  REQUIRE(r);
  CHECK(r->status == 415);
  check_unharmed(t, before, 16);
  const json stats = body_of(t.client(kAdminToken).Get("/api/v1/pools/echo/stats"));
  CHECK(stats["pools"][0]["submitted"] == 0);
}

TEST_CASE("http: a 64 KiB header line is 431 and the connection closed") {
  Target t;
  const Baseline before(t);
  RawHttp c(t.port);
  REQUIRE(c.connected());
  REQUIRE(c.send(request_head("GET", "/api/v1/version", t.port,
                              "X-Filler: " + std::string(64 * 1024, 'a') + "\r\n")));
  const auto r = c.response(milliseconds(10000));
  REQUIRE(r);
  CHECK(r->status == 431);
  CHECK(c.closed_within(milliseconds(5000)));
  check_unharmed(t, before, 16);
}

TEST_CASE("http: a thousand header fields are 431 and the connection closed") {
  Target t;
  const Baseline before(t);
  std::string headers;
  for (int i = 0; i < 1000; ++i) headers += "X-H" + std::to_string(i) + ": v\r\n";
  RawHttp c(t.port);
  REQUIRE(c.connected());
  REQUIRE(c.send(request_head("GET", "/api/v1/version", t.port, headers)));
  const auto r = c.response(milliseconds(10000));
  REQUIRE(r);
  CHECK(r->status == 431);
  CHECK(c.closed_within(milliseconds(5000)));
  check_unharmed(t, before, 16);
}

}  // namespace
}  // namespace sandpool::testing::http_attack
