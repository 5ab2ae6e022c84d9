#include <sandpool/service/signal_watcher.hpp>

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>

using sandpool::poold::SignalWatcher;
using namespace std::chrono_literals;

namespace {

// Generous: a loaded 2-core VM under a sanitizer is slow. A pending signal makes wait()
// return at once, so the bound is never waited out when the test passes.
constexpr auto kPatience = 60s;

SignalWatcher make_watcher() {
  auto w = SignalWatcher::create();
  if (!w) FAIL("SignalWatcher::create: " << w.status().to_string());
  return std::move(w).value();
}

}  // namespace

TEST_CASE("a raised service signal is returned by wait, not delivered") {
  const int sig = GENERATE(SIGTERM, SIGINT, SIGHUP);
  SignalWatcher w = make_watcher();
  REQUIRE(::raise(sig) == 0);  // blocked: it stays pending instead of killing us
  auto got = w.wait(kPatience);
  REQUIRE(got);
  CHECK(*got == std::optional<int>(sig));
  // Consumed: nothing is left.
  auto again = w.wait(0ms);
  REQUIRE(again);
  CHECK(*again == std::nullopt);
}

TEST_CASE("wait returns nothing when the timeout passes without a signal") {
  SignalWatcher w = make_watcher();
  const auto start = std::chrono::steady_clock::now();
  auto got = w.wait(20ms);
  REQUIRE(got);
  CHECK(*got == std::nullopt);
  CHECK(std::chrono::steady_clock::now() - start >= 20ms);
}

TEST_CASE("several pending signals come out one per wait") {
  SignalWatcher w = make_watcher();
  REQUIRE(::kill(::getpid(), SIGHUP) == 0);
  REQUIRE(::kill(::getpid(), SIGTERM) == 0);
  std::set<int> seen;
  for (int i = 0; i < 2; ++i) {
    auto got = w.wait(kPatience);
    REQUIRE(got);
    REQUIRE(*got);
    seen.insert(**got);
  }
  CHECK(seen == std::set<int>{SIGHUP, SIGTERM});
}

TEST_CASE("threads started after the watcher inherit the mask, so a process signal reaches it") {
  SignalWatcher w = make_watcher();
  // A thread that would take a SIGTERM with the default action (and kill the process) if
  // it had the signal unblocked: it runs until the test has its signal.
  std::promise<void> done;
  std::thread other([f = done.get_future()] { f.wait(); });
  REQUIRE(::kill(::getpid(), SIGTERM) == 0);
  auto got = w.wait(kPatience);
  done.set_value();
  other.join();
  REQUIRE(got);
  CHECK(*got == std::optional<int>(SIGTERM));
}

TEST_CASE("the watcher's fd polls readable while a signal is pending") {
  SignalWatcher w = make_watcher();
  pollfd p{.fd = w.fd(), .events = POLLIN, .revents = 0};
  CHECK(::poll(&p, 1, 0) == 0);
  REQUIRE(::raise(SIGINT) == 0);
  CHECK(::poll(&p, 1, 0) == 1);
  auto got = w.wait(0ms);
  REQUIRE(got);
  CHECK(*got == std::optional<int>(SIGINT));
}
