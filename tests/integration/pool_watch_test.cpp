// A worker the pool's loop cannot watch (epoll_ctl(EPOLL_CTL_ADD) refuses one of its fds)
// must not run unseen: the loop would never see it die. A spawner that starts real workers
// hands the pool, for the first one, a pidfd epoll cannot watch (/dev/null).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sandpool/pool/spawner.hpp>

#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;

namespace {

// Starts every child with the real spawner; child number `unwatchable` (1: the first) keeps
// its pidfd here (so the test can still kill and reap it) and the pool gets /dev/null in
// its place. Used by the loop thread only, and read by the test once the pool has answered.
class UnwatchableSpawner : public Spawner {
 public:
  explicit UnwatchableSpawner(int unwatchable) : unwatchable_(unwatchable) {}
  Result<ChildProcess> spawn(const SpawnRequest& request) override {
    auto child = real_->spawn(request);
    if (!child || ++spawned_ != unwatchable_) return child;
    hidden_ = std::move(child).value();
    UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    return ChildProcess(hidden_->pid(), std::move(devnull));
  }
  std::optional<ChildProcess>& hidden() { return hidden_; }

 private:
  std::shared_ptr<Spawner> real_ = make_process_spawner();
  int unwatchable_;
  int spawned_ = 0;
  std::optional<ChildProcess> hidden_;
};

struct WatchLog {
  std::shared_ptr<std::ostringstream> out = std::make_shared<std::ostringstream>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(
      "watch-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(*out));
  std::string text() const {
    logger->flush();
    return out->str();
  }
};

}  // namespace

TEST_CASE("a pool whose first worker epoll cannot watch fails to start, naming epoll_ctl") {
  WatchLog log;
  auto spawner = std::make_shared<UnwatchableSpawner>(1);
  PoolOptions o = pool_options("echo", 1);
  o.spawner = spawner;
  o.logger = log.logger;
  auto pool = Pool::create(o);
  REQUIRE(spawner->hidden());
  const pid_t unwatched = spawner->hidden()->pid();
  spawner->hidden()->signal(SIGKILL);  // before the fix the pool would wait for it forever
  spawner->hidden()->wait();
  REQUIRE_FALSE(pool);
  CHECK(pool.status().message().find("cannot watch worker " + std::to_string(unwatched) +
                                     ": epoll_ctl(EPOLL_CTL_ADD)") != std::string::npos);
  CHECK(log.text().find("cannot watch worker") != std::string::npos);
}

TEST_CASE("a replacement worker epoll cannot watch is refused like a failed spawn") {
  WatchLog log;
  auto spawner = std::make_shared<UnwatchableSpawner>(2);
  PoolOptions o = pool_options("echo", 1);
  o.spawner = spawner;
  o.logger = log.logger;
  auto pool = make_pool(o);
  const std::int32_t first = pool->workers().front().pid;
  REQUIRE(pool->kill_worker(first, SIGKILL));

  // The pool serves again, with a worker it can see, not with the one it could not watch.
  CHECK(run(*pool, "echo", "hi").result == "hi");
  REQUIRE(spawner->hidden());
  const pid_t unwatched = spawner->hidden()->pid();
  const auto workers = pool->workers();
  REQUIRE(workers.size() == 1);
  CHECK(workers.front().pid != first);
  CHECK(workers.front().pid != unwatched);
  CHECK(log.text().find("cannot watch worker " + std::to_string(unwatched) +
                        ": epoll_ctl(EPOLL_CTL_ADD)") != std::string::npos);
  spawner->hidden()->signal(SIGKILL);  // before the fix the pool would wait for it forever
  spawner->hidden()->wait();
}
