// poold under a real notify socket (a unix datagram socket bound by the test, as systemd's
// is): READY=1 once the control socket listens, WATCHDOG=1 while every thread is healthy;
// and a poold thread stuck for real (its log write blocked on a full stderr pipe, no
// production hook involved) stops the pings and is named by /healthz.
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <regex>
#include <string>

#include <sandpool/base/unique_fd.hpp>

#include "poold_process.hpp"
#include "task_waits.hpp"

namespace sandpool::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The service manager's end of NOTIFY_SOCKET.
struct NotifySocket {
  TempDir dir;
  std::string path = (dir.path / "notify").string();
  UniqueFd sock{::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)};

  NotifySocket() {
    REQUIRE(sock);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }

  // The next datagram within `wait` (kPatience by default), or nullopt.
  std::optional<std::string> next(std::chrono::milliseconds wait = kPatience) {
    pollfd p{sock.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
    REQUIRE(n >= 0);
    return std::string(buf, static_cast<std::size_t>(n));
  }
  // Waits for a datagram that contains `text`; false when none came within kPatience.
  bool wait_for(const std::string& text) {
    const auto until = Clock::now() + kPatience;
    while (Clock::now() < until) {
      auto m = next(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
      if (m && m->find(text) != std::string::npos) return true;
    }
    return false;
  }
  // How many WATCHDOG=1 are queued now (read without waiting).
  int pings_queued() {
    int n = 0;
    while (auto m = next(std::chrono::milliseconds(0))) n += *m == "WATCHDOG=1";
    return n;
  }
};

// WatchdogSec=4s: poold pings every second and calls a thread stuck after 2 s in one item
// of work, long enough that a loaded 2-core VM never trips it by accident.
const std::string kWatchdogUsec = "4000000";

std::vector<std::string> notify_env(const NotifySocket& n) {
  return {"NOTIFY_SOCKET=" + n.path, "WATCHDOG_USEC=" + kWatchdogUsec, "WATCHDOG_PID"};
}

// Asks /healthz until `pred(status, body)` holds; false after kPatience.
template <typename Pred>
bool healthz_until(int port, Pred pred, std::string* last) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  const auto until = Clock::now() + kPatience;
  while (Clock::now() < until) {
    auto r = http.Get("/healthz");
    if (r) {
      *last = std::to_string(r->status) + " " + r->body;
      if (pred(r->status, r->body)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling an HTTP endpoint
  }
  return false;
}

}  // namespace

TEST_CASE("poold under systemd: READY=1 once the control socket listens, then WATCHDOG=1 pings") {
  NotifySocket manager;
  TempDir dir;
  const auto config = dir.path / "poold.yaml";
  write_file(config, service_yaml(dir.path) + "pools:\n" + pool_yaml("echo", "echo"));
  PooldProcess poold(config, {}, notify_env(manager));
  REQUIRE(manager.wait_for("READY=1"));
  // READY=1 came after the socket listens: a client connects at once.
  auto c = Client::connect((dir.path / "poold.sock").string());
  REQUIRE(c);
  REQUIRE(as_json(c->status()));
  for (int i = 0; i < 3; ++i) REQUIRE(manager.wait_for("WATCHDOG=1"));
  REQUIRE(as_json(c->shutdown()));
  CHECK(manager.wait_for("STOPPING=1"));
  CHECK(poold.wait_exit() == 0);
}

TEST_CASE("poold: a thread stuck in one item of work stops the pings and /healthz names it") {
  NotifySocket manager;
  TempDir dir;
  const auto config = dir.path / "poold.yaml";
  write_file(config, service_yaml(dir.path) + "pools:\n" + pool_yaml("echo", "echo"));
  PooldProcess poold(config, {}, notify_env(manager));
  REQUIRE(poold.wait_ready());
  REQUIRE(manager.wait_for("WATCHDOG=1"));
  const int port = metrics_port(poold);
  auto c = Client::connect((dir.path / "poold.sock").string());
  REQUIRE(c);
  auto workers = as_json(c->workers("echo"));
  REQUIRE(workers);
  const std::int32_t pid = (*workers)["workers"][0]["pid"];

  // The pool's loop thread logs the worker's death: with poold's stderr pipe full, that write
  // blocks inside one iteration of the loop, for real. (Killed from here, not through the
  // control socket, so that no request waits on the loop.)
  poold.block_output();
  REQUIRE(::kill(pid, SIGKILL) == 0);
  std::string health;
  CHECK(healthz_until(
      port,
      [](int status, const std::string& body) {
        return status == 503 && body.find("thread sp-loop:echo has been inside one item of work") !=
                                    std::string::npos;
      },
      &health));
  INFO("/healthz: " << health);
  // Every check of the main loop from now on finds the thread stuck, and logs that it
  // withholds the pings: it waits for the log's lock, held by the loop thread writing into
  // the full pipe, until the pipe drains. Once the main thread is seen waiting (its idle
  // wait is poll(2)), every ping it sent before is queued here, and none can follow: an
  // absence shown by the state poold is in, not over a window of time. After the pipe
  // drains, its first word is STATUS=stuck, then, once the loop finished its iteration,
  // serving and the pings.
  REQUIRE(poll_until(
      [&] { return poold.waiting_on_lock(poold.pid()) || poold.writing_log(poold.pid()); }));
  (void)manager.pings_queued();
  poold.resume_output();
  auto said = manager.next();
  REQUIRE(said);
  CHECK_THAT(*said, Catch::StartsWith("STATUS=stuck: ") && Catch::Contains("sp-loop:echo"));
  said = manager.next();
  REQUIRE(said);
  CHECK(*said == "STATUS=serving");
  said = manager.next();
  REQUIRE(said);
  CHECK(*said == "WATCHDOG=1");
  CHECK(healthz_until(
      port, [](int status, const std::string&) { return status == 200; }, &health));
  INFO("/healthz: " << health);
  REQUIRE(as_json(c->shutdown()));
  CHECK(poold.wait_exit() == 0);
  CHECK(poold.wait_for_output("watchdog: withheld"));
}

}  // namespace sandpool::testing
