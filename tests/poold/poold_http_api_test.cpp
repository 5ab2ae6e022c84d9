// The HTTP API of a real poold (docs/protocol.md, "HTTP API"), over real HTTP requests: the
// same operations as the socket with the rights of the token sent, a waited submit that
// answers with the result, dead letters listed and replayed, a worker killed and replaced
// (seen on the events stream), the stream cap, the session cookie with its CSRF token, and
// the listeners poold refuses to start.
#include <catch2/catch.hpp>
#include <regex>

#include "command_runner.hpp"
#include "http_test_support.hpp"

namespace sandpool::testing {
namespace {

using nlohmann::json;
using namespace http_support;

const std::string kPools = "pools:\n" + pool_yaml("echo", "echo") + pool_yaml("fail", "fail");

std::string post_json(const json& j) { return j.dump(); }

TEST_CASE("http: one listener serves /metrics, /healthz and the API, and status reports it") {
  HttpFixture f(kPools);
  auto c = f.client(kReadToken);
  auto health = c.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto metrics = c.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("sandpool_queue_depth{pool=\"echo\"}") != std::string::npos);

  const json status = body_of(c.Get("/api/v1/status"));
  CHECK(status["http"] == "127.0.0.1:" + std::to_string(f.port));
  CHECK(status["pools"].size() == 2);

  const auto poolctl =
      run_command(std::string(SANDPOOL_BIN_DIR) + "/poolctl",
                  {"--socket", (f.dir.path / "poold.sock").string(), "status", "--json"});
  INFO(poolctl.err);
  REQUIRE(poolctl.exit_code == 0);
  CHECK(json::parse(poolctl.out)["http"] == "127.0.0.1:" + std::to_string(f.port));

  // An operation by its name, and one the protocol does not have.
  CHECK(body_of(c.Get("/api/v1/version"))["protocol"].is_number());
  auto unknown = c.Get("/api/v1/no_such_op");
  REQUIRE(unknown);
  CHECK(unknown->status == 404);
  CHECK(body_of(unknown)["error"] == "unknown_op");
}

TEST_CASE("http: a waited submit answers with the result, and the rights decide what reads show") {
  HttpFixture f(kPools);
  auto admin = f.client(kAdminToken);
  const json done = body_of(admin.Post(
      "/api/v1/pools/echo/tasks",
      post_json({{"type", "echo"}, {"payload", "hello"}, {"wait", true}}), "application/json"));
  CHECK(done["state"] == "completed");
  CHECK(done["blob"] == "hello");
  const std::uint64_t id = done["id"];

  // Bytes that are not UTF-8 travel as base64 both ways.
  const json binary = body_of(admin.Post(
      "/api/v1/submit", post_json({{"type", "echo"}, {"payload_base64", "/w=="}, {"wait", true}}),
      "application/json"));
  CHECK(binary["blob_base64"] == "/w==");

  const std::string path = "/api/v1/tasks/" + std::to_string(id);
  SECTION("without a token: nothing, once a token is configured") {
    auto t = f.client().Get(path);
    REQUIRE(t);
    CHECK(t->status == 401);
    CHECK(t->get_header_value("WWW-Authenticate") == "Bearer");
  }
  SECTION("the read token shows the result") {
    const json t = body_of(f.client(kReadToken).Get(path));
    CHECK(t["blob"] == "hello");
    CHECK_FALSE(t.contains("result_withheld"));
  }
  SECTION("submits need the admin token") {
    const std::string task = post_json({{"type", "echo"}, {"payload", "x"}});
    auto anonymous = f.client().Post("/api/v1/pools/echo/tasks", task, "application/json");
    REQUIRE(anonymous);
    CHECK(anonymous->status == 401);
    CHECK(anonymous->get_header_value("WWW-Authenticate") == "Bearer");
    auto read = f.client(kReadToken).Post("/api/v1/pools/echo/tasks", task, "application/json");
    REQUIRE(read);
    CHECK(read->status == 403);
    CHECK(body_of(read)["error"] == "forbidden");
    auto shutdown = f.client(kReadToken).Post("/api/v1/shutdown", "{}", "application/json");
    REQUIRE(shutdown);
    CHECK(shutdown->status == 403);
  }
  SECTION("a token that is not ours, or one in the URL, is refused") {
    auto wrong = f.client("not-a-token-of-this-service").Get(path);
    REQUIRE(wrong);
    CHECK(wrong->status == 401);
    auto in_url = f.client().Get(path + "?token=" + kAdminToken);
    REQUIRE(in_url);
    CHECK(in_url->status == 400);
  }
  SECTION("a GET never changes anything") {
    auto drain = admin.Get("/api/v1/drain?pool=echo");
    REQUIRE(drain);
    CHECK(drain->status == 400);
    CHECK(body_of(admin.Get("/api/v1/pools/echo/stats"))["pools"][0]["state"] == "running");
  }
  SECTION("errors keep the protocol's codes") {
    auto missing = admin.Get("/api/v1/tasks/999999");
    REQUIRE(missing);
    CHECK(missing->status == 404);
    CHECK(body_of(missing)["error"] == "not_found");
    auto bad = admin.Post("/api/v1/pools/echo/scale", post_json({{"workers", "many"}}),
                          "application/json");
    REQUIRE(bad);
    CHECK(bad->status == 400);
    CHECK(body_of(bad)["message"].get<std::string>().find("workers") != std::string::npos);
  }
}

TEST_CASE("http: tasks are found by pool, type, state and key, newest first") {
  HttpFixture f(kPools);
  auto admin = f.client(kAdminToken);
  const auto submit = [&](const std::string& pool, const std::string& key) {
    return body_of(admin.Post(
        "/api/v1/pools/" + pool + "/tasks",
        post_json({{"type", pool}, {"payload", "p"}, {"key", key}, {"wait", true}}),
        "application/json"))["id"]
        .get<std::uint64_t>();
  };
  const std::uint64_t first = submit("echo", "k1");
  const std::uint64_t second = submit("echo", "k2");
  const std::uint64_t failed = submit("fail", "k1");

  auto reader = f.client(kReadToken);
  const json echo = body_of(reader.Get("/api/v1/tasks?pool=echo"));
  REQUIRE(echo["tasks"].size() == 2);
  CHECK(echo["tasks"][0]["id"] == second);
  CHECK(echo["tasks"][1]["id"] == first);
  CHECK(echo["tasks"][0]["state"] == "completed");
  CHECK(echo["tasks"][0]["key"] == "k2");
  CHECK(echo["truncated"] == false);

  const json by_key = body_of(reader.Get("/api/v1/tasks?key=k1&type=echo"));
  REQUIRE(by_key["tasks"].size() == 1);
  CHECK(by_key["tasks"][0]["id"] == first);
  const json dead = body_of(reader.Get("/api/v1/tasks?state=dead_lettered"));
  REQUIRE(dead["tasks"].size() == 1);
  CHECK(dead["tasks"][0]["id"] == failed);
  CHECK(dead["tasks"][0]["pool"] == "fail");
  CHECK(dead["tasks"][0]["reason"] == "permanent");
  const json one = body_of(reader.Get("/api/v1/tasks?limit=1"));
  CHECK(one["tasks"].size() == 1);
  CHECK(one["truncated"] == true);
  const json later = body_of(
      reader.Get("/api/v1/tasks?since_ms=" +
                 std::to_string(echo["tasks"][0]["submitted_ms"].get<std::int64_t>() + 60000)));
  CHECK(later["tasks"].empty());

  auto bad = reader.Get("/api/v1/tasks?state=finished");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(body_of(bad)["message"].get<std::string>().find("no task state") != std::string::npos);

  auto page = reader.Get("/tasks?pool=echo&key=k2");
  REQUIRE(page);
  CHECK(page->body.find("data-task=\"" + std::to_string(second) + "\"") != std::string::npos);
  CHECK(page->body.find("data-task=\"" + std::to_string(first) + "\"") == std::string::npos);
}

TEST_CASE("http: dead letters are listed with a token only and replayed with the admin one") {
  HttpFixture f(kPools);
  auto admin = f.client(kAdminToken);
  const json dead = body_of(admin.Post(
      "/api/v1/pools/fail/tasks",
      post_json({{"type", "fail"}, {"payload", "<b>no</b>"}, {"wait", true}}), "application/json"));
  CHECK(dead["state"] == "dead_lettered");

  auto anonymous = f.client().Get("/api/v1/dlq?pool=fail");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);

  const json list = body_of(f.client(kReadToken).Get("/api/v1/dlq?pool=fail"));
  REQUIRE(list["entries"].size() == 1);
  const std::uint64_t letter = list["entries"][0]["letter_id"];
  const json shown = body_of(f.client(kReadToken).Get("/api/v1/dlq/" + std::to_string(letter)));
  CHECK(shown["blob"] == "<b>no</b>");

  auto read_replay =
      f.client(kReadToken)
          .Post("/api/v1/dlq/replay", post_json({{"id", letter}}), "application/json");
  REQUIRE(read_replay);
  CHECK(read_replay->status == 403);
  const json replayed =
      body_of(admin.Post("/api/v1/dlq/replay", post_json({{"id", letter}}), "application/json"));
  CHECK(replayed["replayed"] == 1);
  const std::uint64_t again = replayed["ids"][0];
  const json ended = body_of(admin.Get("/api/v1/tasks/" + std::to_string(again) + "/wait"));
  CHECK(ended["state"] == "dead_lettered");
  const json purged =
      body_of(admin.Post("/api/v1/dlq/purge", post_json({{"all", true}}), "application/json"));
  CHECK(purged["purged"] == 1);
}

TEST_CASE("http: a worker killed over HTTP is replaced, as the events stream shows") {
  HttpFixture f(kPools);
  auto admin = f.client(kAdminToken);
  const json workers = body_of(f.client(kReadToken).Get("/api/v1/pools/echo/workers"));
  REQUIRE(workers["workers"].size() == 1);
  const int pid = workers["workers"][0]["pid"];

  SseReader events(f.port, "/api/v1/events?pool=echo", read_header());
  REQUIRE(events.status() == 200);
  auto killed =
      admin.Post("/api/v1/pools/echo/kill-worker", post_json({{"pid", pid}}), "application/json");
  REQUIRE(killed);
  INFO(killed->body);
  CHECK(killed->status == 200);
  bool exited = false;
  std::optional<int> replacement;
  while (!replacement) {
    auto e = events.next();
    REQUIRE(e);
    if ((*e)["event"] == "worker_exited" && (*e)["pid"] == pid) exited = true;
    if (exited && (*e)["event"] == "worker_ready") replacement = (*e)["pid"].get<int>();
  }
  CHECK(*replacement != pid);
  SseReader recent(f.port, "/api/v1/events?pool=echo&follow=false", read_header());
  REQUIRE(recent.status() == 200);
  bool started = false;
  while (auto e = recent.next()) started = started || (*e)["event"] == "worker_started";
  CHECK(started);  // the stream ended (next() gave nothing) after the recent events
  const json after = body_of(f.client(kReadToken).Get("/api/v1/pools/echo/workers"));
  REQUIRE(after["workers"].size() == 1);
  CHECK(after["workers"][0]["pid"] == *replacement);
}

TEST_CASE("http: event streams are capped, and the API answers while the cap is reached") {
  HttpFixture f(kPools);
  // Of the 8 streams, 2 are kept for admins: the read token takes 6.
  std::vector<std::unique_ptr<SseReader>> open;
  for (int i = 0; i < 6; ++i) {
    open.push_back(std::make_unique<SseReader>(f.port, "/api/v1/events", read_header()));
    REQUIRE(open.back()->status() == 200);
  }
  SseReader over(f.port, "/api/v1/events", read_header());
  CHECK(over.status() == 429);
  SseReader admin(f.port, "/api/v1/events", admin_header());
  CHECK(admin.status() == 200);
  CHECK(body_of(f.client(kReadToken).Get("/api/v1/status"))["pools"].size() == 2);
  open.pop_back();  // a closed stream gives back its place (found at its next write)
}

TEST_CASE("http: the login form's session cookie needs its CSRF token to change anything") {
  HttpFixture f(kPools);
  auto c = f.client();
  auto login =
      c.Post("/login", "token=" + std::string(kAdminToken), "application/x-www-form-urlencoded");
  REQUIRE(login);
  CHECK(login->status == 303);
  const std::string cookie = login->get_header_value("Set-Cookie");
  REQUIRE(cookie.rfind("sp_session_" + std::to_string(f.port) + "=", 0) == 0);
  CHECK(cookie.find("HttpOnly") != std::string::npos);
  CHECK(cookie.find("SameSite=Strict") != std::string::npos);
  const httplib::Headers with_cookie = {{"Cookie", cookie.substr(0, cookie.find(';'))}};

  auto page = c.Get("/", with_cookie);
  REQUIRE(page);
  std::smatch m;
  REQUIRE(
      std::regex_search(page->body, m, std::regex(R"(<meta name=csrf content="([0-9a-f]+)\")")));
  const std::string csrf = m[1];

  auto no_csrf = c.Post("/api/v1/pools/echo/drain", with_cookie, "{}", "application/json");
  REQUIRE(no_csrf);
  CHECK(no_csrf->status == 403);
  auto form = c.Post("/ui/drain", with_cookie, "pool=echo&csrf=" + csrf + "&return=/pools/echo",
                     "application/x-www-form-urlencoded");
  REQUIRE(form);
  CHECK(form->status == 303);
  CHECK(form->get_header_value("Location").rfind("/pools/echo?msg=", 0) == 0);
  // Drained: a submit is refused until the pool is resumed.
  const std::string task = json{{"type", "echo"}, {"payload", "x"}}.dump();
  auto refused = f.client(kAdminToken).Post("/api/v1/pools/echo/tasks", task, "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 503);
  CHECK(body_of(refused)["message"].get<std::string>().find("draining") != std::string::npos);
  httplib::Headers with_csrf = with_cookie;
  with_csrf.emplace("X-CSRF-Token", csrf);
  auto resumed = c.Post("/api/v1/pools/echo/resume", with_csrf, "{}", "application/json");
  REQUIRE(resumed);
  CHECK(resumed->status == 200);
  auto accepted = f.client(kAdminToken).Post("/api/v1/pools/echo/tasks", task, "application/json");
  REQUIRE(accepted);
  CHECK(accepted->status == 200);

  auto bad_login = c.Post("/login", "token=wrong", "application/x-www-form-urlencoded");
  REQUIRE(bad_login);
  CHECK(bad_login->status == 401);
}

TEST_CASE("http: without an admin token nothing over HTTP changes the service") {
  HttpFixture f(kPools, /*admin_token=*/false);
  auto read = f.client(kReadToken);
  auto drain = read.Post("/api/v1/pools/echo/drain", "{}", "application/json");
  REQUIRE(drain);
  CHECK(drain->status == 403);
  CHECK(body_of(drain)["message"].get<std::string>().find("read-only") != std::string::npos);
  auto page = f.client(kReadToken).Get("/");
  REQUIRE(page);
  CHECK(page->body.find("id=read-only") != std::string::npos);
  CHECK(f.poold->wait_for_output("http read-only"));  // the ready line may be read in parts
}

TEST_CASE("http: poold refuses a listener it cannot keep safe, saying why") {
  TempDir dir;
  const auto config = dir.path / "poold.yaml";
  const std::string pools = "pools:\n" + pool_yaml("echo", "echo");
  SECTION("a non-loopback address without a token") {
    write_file(config, http_service_yaml(dir.path, "{listen: 0.0.0.0:0}") + pools);
    PooldProcess poold(config);
    CHECK(poold.wait_exit() == 1);
    CHECK(poold.output().find("not a loopback address and no token is configured") !=
          std::string::npos);
  }
  SECTION("a token file others can read") {
    write_token(dir.path / "admin.token", kAdminToken, 0644);
    write_file(config, http_service_yaml(dir.path, "{listen: 127.0.0.1:0, admin_token_file: " +
                                                       (dir.path / "admin.token").string() + "}") +
                           pools);
    PooldProcess poold(config);
    CHECK(poold.wait_exit() == 1);
    CHECK(poold.output().find("mode 0644 lets others read it") != std::string::npos);
  }
  SECTION("a token too short to be one") {
    write_token(dir.path / "admin.token", "short");
    write_file(config, http_service_yaml(dir.path, "{listen: 127.0.0.1:0, admin_token_file: " +
                                                       (dir.path / "admin.token").string() + "}") +
                           pools);
    PooldProcess poold(config);
    CHECK(poold.wait_exit() == 1);
    CHECK(poold.output().find("at least 16") != std::string::npos);
  }
}

TEST_CASE("http: the deprecated service.metrics.listen still opens the listener, with a warning") {
  PooldFixture f("pools:\n" + pool_yaml("echo", "echo"));  // its service has metrics.listen
  CHECK(f.poold->output().find("service.metrics.listen: deprecated") != std::string::npos);
  httplib::Client c("127.0.0.1", metrics_port(*f.poold));
  auto health = c.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
}

}  // namespace
}  // namespace sandpool::testing
