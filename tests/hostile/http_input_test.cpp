// Hostile HTTP input that must never end poold (docs/security.md, "The HTTP listener",
// steps 2, 6, 7 and 9): text that is not UTF-8 in a path or a query (and in a control socket
// frame), ids longer than any task's, a wait's timeout_ms past a day, JSON nested without
// end. Each against a real poold, which must live on, answer /healthz and stay small.
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <cstring>

#include <sandpool/control/frame_codec.hpp>
#include "command_runner.hpp"
#include "http_attack.hpp"

namespace sandpool::testing::http_attack {
namespace {

using nlohmann::json;

// Each path, with the argument its 400 must name ("" for a page, whose HTML names it).
struct BadText {
  const char* path;
  const char* argument;
};

TEST_CASE("http: a path or query that is not UTF-8 is 400 naming the argument, and poold lives") {
  Target t;
  const Baseline before(t);
  const BadText attack = GENERATE(
      BadText{"/api/v1/stats?pool=%FF", "pool"}, BadText{"/api/v1/tasks?state=%FF", "state"},
      BadText{"/api/v1/tasks?key=%C3%28", "key"}, BadText{"/api/v1/pools/%FF/stats", "pool"},
      BadText{"/pools/%FF", ""}, BadText{"/tasks?state=%FF", ""});
  const char* token = GENERATE(static_cast<const char*>(nullptr), kReadToken);
  INFO("GET " << attack.path << (token ? " with the read token" : " without a token"));
  const auto r =
      round_trip(t.port, request_head("GET", attack.path, t.port, token ? bearer(token) : ""));
  REQUIRE(r);
  CHECK(r->status == 400);
  if (*attack.argument != '\0') {
    INFO(r->body);
    CHECK(json_field(r->body, "error") == "bad_request");
    CHECK(json_field(r->body, "message").find(attack.argument) != std::string::npos);
  }
  check_unharmed(t, before, 16);
}

// One request frame on a raw control connection, its JSON text given as bytes; the reply's
// kind and name (the error code), or nullopt when poold closed the connection.
std::optional<control::Frame> control_call(const std::string& socket, const std::string& op,
                                           const std::string& json_bytes) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::string bytes;
  control::encode_frame({control::FrameKind::kHello, 1, "", R"({"version":1})", {}}, &bytes);
  control::encode_frame({control::FrameKind::kRequest, 2, op, json_bytes, {}}, &bytes);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
  control::FrameDecoder decoder(64u << 20);
  std::optional<control::Frame> reply;
  while (!reply) {
    control::Frame f;
    control::FrameDecoder::Error err;
    const auto s = decoder.next(&f, &err);
    if (s == control::FrameDecoder::Status::kFrame) {
      if (f.id == 2) reply = std::move(f);
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) break;
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    decoder.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }
  ::close(fd);
  return reply;
}

TEST_CASE("control socket: a name or argument that is not UTF-8 is refused, and poold lives") {
  Target t;
  const Baseline before(t);
  // An operation and its JSON arguments, as raw bytes.
  const auto [op, args] =
      GENERATE(table<std::string, std::string>({{"stats", "{\"pool\":\"\xff\"}"},
                                                {"drain", "{\"pool\":\"\xff\"}"},
                                                {"tasks", "{\"state\":\"\xff\"}"},
                                                {"stats\xff", "{}"},
                                                {"\xff", "{}"}}));
  INFO("op " << op << " args " << args);
  const auto reply = control_call(t.socket(), op, args);
  check_unharmed(t, before, 16);
  CHECK(submit_status(t) == 200);
  REQUIRE(reply);  // none: poold closed the connection instead of answering
  CHECK(reply->kind == control::FrameKind::kError);
}

TEST_CASE("poolctl: a pool name with byte 0xFF is refused with a message, and poold lives") {
  Target t;
  const auto r = run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl",
                             {"--socket", t.socket(), "stats", "\xff"});
  INFO(r.out << r.err);
  // Refused (1: by poold; 2: as a malformed argument), with a message; not aborted.
  CHECK((r.exit_code == 1 || r.exit_code == 2));
  CHECK(r.err.find("terminate called") == std::string::npos);
  REQUIRE(alive(t.poold->pid()));
  CHECK(healthz_within(t.port) == 200);
}

TEST_CASE("http: an id longer than any task's is 4xx, not 500") {
  Target t;
  const Baseline before(t);
  const std::string digits20 = "99999999999999999999";
  const std::string digits30 = "999999999999999999999999999999";
  const std::string path = GENERATE_COPY(
      "/api/v1/tasks/" + digits20, "/api/v1/tasks/" + digits20 + "/wait", "/api/v1/dlq/" + digits20,
      "/api/v1/task?id=" + digits30, "/tasks/" + digits20, "/tasks?id=" + digits30,
      "/dlq/" + digits20, "/api/v1/tasks/18446744073709551616");
  INFO("GET " << path);
  const auto r = round_trip(t.port, request_head("GET", path, t.port, bearer(kAdminToken)));
  REQUIRE(r);
  CHECK(r->status >= 400);
  CHECK(r->status < 500);
  check_unharmed(t, before, 16);
}

TEST_CASE("http: the dead-letter form with an id of 30 digits is 4xx, not 500") {
  Target t;
  const Baseline before(t);
  const auto s = log_in(t, kAdminToken);
  REQUIRE(s);
  const auto r = round_trip(
      t.port, form_post(t, "/ui/dlq",
                        "action=replay_selected&id=999999999999999999999999999999&csrf=" + s->csrf,
                        s->cookie));
  REQUIRE(r);
  CHECK(r->status != 500);
  CHECK((r->status < 500 || r->status == 303));
  check_unharmed(t, before, 16);
}

TEST_CASE("http: a wait's timeout_ms past a year is 400, never an overflow") {
  Target t;
  auto admin = t.client(kAdminToken);
  // A task due in an hour: a wait on it ends only by its timeout.
  const json later = body_of(admin.Post(
      "/api/v1/pools/echo/tasks",
      json{{"type", "echo"}, {"payload", "x"}, {"delay_ms", 3600000}}.dump(), "application/json"));
  const std::string id = std::to_string(later["id"].get<std::uint64_t>());
  // The timeout over the query, or in a JSON body (2^62; 10^18 - 1; 366 days and 1 ms).
  const auto [in_body, timeout] =
      GENERATE(table<bool, std::string>({{false, "4611686018427387904"},
                                         {false, "999999999999999999"},
                                         {false, "31622400001"},
                                         {true, "4611686018427387904"}}));
  const std::string body = R"({"id":)" + id + R"(,"timeout_ms":)" + timeout + "}";
  const std::string sent =
      in_body ? json_post(t, "/api/v1/wait", body, bearer(kAdminToken))
              : request_head("GET", "/api/v1/tasks/" + id + "/wait?timeout_ms=" + timeout, t.port,
                             bearer(kAdminToken));
  INFO(sent.substr(0, sent.find('\r')));
  const auto start = Clock::now();
  const auto r = round_trip(t.port, sent, milliseconds(10000));
  REQUIRE(r);  // no answer in 10 s: the wait took the timeout as given
  INFO(r->body);
  CHECK(r->status == 400);
  CHECK(json_field(r->body, "message").find("timeout_ms") != std::string::npos);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  REQUIRE(alive(t.poold->pid()));
}

TEST_CASE("http: 1 MiB of opening brackets posted with the admin token is 400, builds nothing") {
  Target t;
  const Baseline before(t);
  const auto r = round_trip(t.port, json_post(t, "/api/v1/pools/echo/tasks",
                                              std::string(1u << 20, '['), bearer(kAdminToken)));
  REQUIRE(r);
  CHECK(r->status == 400);
  check_unharmed(t, before, 24);
}

}  // namespace
}  // namespace sandpool::testing::http_attack
