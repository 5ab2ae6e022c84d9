// WaitDeadlines: each deadline expires once, in time order, on the sp-waits thread.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/service/wait_deadlines.hpp>

using namespace sandpool;
using poold::WaitDeadlines;

namespace {

struct Expired {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
  std::string thread;

  void add(std::uint64_t task, std::uint64_t token) {
    char name[16] = {};
    ::pthread_getname_np(::pthread_self(), name, sizeof name);
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(task, token);
    thread = name;
    cv.notify_all();
  }
  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return seen.size() >= n; });
  }
};

}  // namespace

TEST_CASE("wait deadlines expire in time order, each once, on the sp-waits thread") {
  Expired expired;
  WaitDeadlines deadlines(
      [&](std::uint64_t task, std::uint64_t token) { expired.add(task, token); });
  const auto now = WaitDeadlines::Clock::now();
  // Added latest first: an earlier deadline added later still expires first.
  deadlines.add(now + std::chrono::milliseconds(300), 3, 30);
  deadlines.add(now + std::chrono::milliseconds(200), 2, 20);
  deadlines.add(now - std::chrono::milliseconds(1), 1, 10);  // already passed
  REQUIRE(expired.wait_for(3));
  std::lock_guard<std::mutex> lock(expired.mu);
  CHECK(expired.seen ==
        std::vector<std::pair<std::uint64_t, std::uint64_t>>{{1, 10}, {2, 20}, {3, 30}});
  CHECK(expired.thread == "sp-waits");
}

TEST_CASE("wait deadlines still pending at destruction are dropped, not expired") {
  Expired expired;
  {
    WaitDeadlines deadlines(
        [&](std::uint64_t task, std::uint64_t token) { expired.add(task, token); });
    deadlines.add(WaitDeadlines::Clock::now() + std::chrono::hours(1), 1, 1);
  }
  std::lock_guard<std::mutex> lock(expired.mu);
  CHECK(expired.seen.empty());
}
