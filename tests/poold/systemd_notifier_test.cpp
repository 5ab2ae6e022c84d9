#include <sandpool/service/systemd_notifier.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <string>

#include <sandpool/base/unique_fd.hpp>

#include "poold_test_support.hpp"

using sandpool::UniqueFd;
using sandpool::poold::SystemdNotifier;
using sandpool::testing::ScopedEnv;
using sandpool::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// The service manager's end: an AF_UNIX datagram socket bound where NOTIFY_SOCKET points.
struct FakeServiceManager {
  TempDir dir;
  std::string path = (dir.path / "notify").string();
  UniqueFd sock{::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)};

  FakeServiceManager() {
    REQUIRE(sock);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }

  // The next datagram, or nullopt when none is queued. sd_notify's send to a local datagram
  // socket has queued the message by the time it returns, so no waiting is needed.
  std::optional<std::string> next() {
    pollfd p{.fd = sock.get(), .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 0) != 1) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
    REQUIRE(n >= 0);
    return std::string(buf, static_cast<std::size_t>(n));
  }
};

}  // namespace

TEST_CASE("under systemd each notification is one datagram with the exact assignments") {
  FakeServiceManager manager;
  ScopedEnv socket("NOTIFY_SOCKET", manager.path);
  SystemdNotifier notifier;
  REQUIRE(notifier.under_systemd());

  REQUIRE(notifier.ready("serving 2 pools"));
  CHECK(manager.next() == "READY=1\nSTATUS=serving 2 pools");
  REQUIRE(notifier.status("reloading: pools.yaml"));
  CHECK(manager.next() == "STATUS=reloading: pools.yaml");
  REQUIRE(notifier.watchdog());
  CHECK(manager.next() == "WATCHDOG=1");
  REQUIRE(notifier.stopping());
  CHECK(manager.next() == "STOPPING=1");
  REQUIRE(notifier.stopping("draining 3 tasks"));
  CHECK(manager.next() == "STOPPING=1\nSTATUS=draining 3 tasks");
  CHECK(manager.next() == std::nullopt);
}

TEST_CASE("a reload is announced with RELOADING=1 and the monotonic time") {
  FakeServiceManager manager;
  ScopedEnv socket("NOTIFY_SOCKET", manager.path);
  SystemdNotifier notifier;
  timespec before{};
  ::clock_gettime(CLOCK_MONOTONIC, &before);
  REQUIRE(notifier.reloading());
  auto msg = manager.next();
  REQUIRE(msg);
  const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
  REQUIRE(msg->rfind(prefix, 0) == 0);
  const auto usec = std::stoull(msg->substr(prefix.size()));
  CHECK(usec >= static_cast<unsigned long long>(before.tv_sec) * 1'000'000ull);
}

TEST_CASE("a status text cannot inject assignments of its own") {
  FakeServiceManager manager;
  ScopedEnv socket("NOTIFY_SOCKET", manager.path);
  SystemdNotifier notifier;
  REQUIRE(notifier.status("pool a failed\nREADY=1\r\nMAINPID=1"));
  CHECK(manager.next() == "STATUS=pool a failed READY=1  MAINPID=1");
}

TEST_CASE("outside systemd every call is a no-op that succeeds") {
  FakeServiceManager manager;  // listening, but nobody is told where
  ScopedEnv socket("NOTIFY_SOCKET", std::nullopt);
  ScopedEnv usec("WATCHDOG_USEC", "30000000");
  SystemdNotifier notifier;
  CHECK_FALSE(notifier.under_systemd());
  CHECK(notifier.ready("up"));
  CHECK(notifier.reloading());
  CHECK(notifier.status("x"));
  CHECK(notifier.watchdog());
  CHECK(notifier.stopping());
  CHECK(notifier.watchdog_interval() == 0us);
  CHECK(manager.next() == std::nullopt);
}

TEST_CASE("the watchdog interval is WatchdogSec when it is meant for this process") {
  FakeServiceManager manager;
  ScopedEnv socket("NOTIFY_SOCKET", manager.path);
  ScopedEnv usec("WATCHDOG_USEC", "30000000");
  SECTION("WATCHDOG_PID is ours") {
    ScopedEnv pid("WATCHDOG_PID", std::to_string(::getpid()));
    CHECK(SystemdNotifier().watchdog_interval() == 30s);
  }
  SECTION("no WATCHDOG_PID: meant for whoever reads it") {
    ScopedEnv pid("WATCHDOG_PID", std::nullopt);
    CHECK(SystemdNotifier().watchdog_interval() == 30s);
  }
  SECTION("WATCHDOG_PID is another process (we are a child of the service)") {
    ScopedEnv pid("WATCHDOG_PID", std::to_string(::getppid()));
    CHECK(SystemdNotifier().watchdog_interval() == 0us);
  }
  SECTION("WatchdogSec is off") {
    ScopedEnv off("WATCHDOG_USEC", std::nullopt);
    CHECK(SystemdNotifier().watchdog_interval() == 0us);
  }
}

TEST_CASE("a notification that cannot be delivered is an error naming sd_notify") {
  TempDir dir;
  ScopedEnv socket("NOTIFY_SOCKET", (dir.path / "nobody-listens").string());
  SystemdNotifier notifier;
  auto s = notifier.ready("up");
  REQUIRE_FALSE(s);
  CHECK(s.message().find("sd_notify") != std::string::npos);
  CHECK(s.sys_errno() != 0);
}
