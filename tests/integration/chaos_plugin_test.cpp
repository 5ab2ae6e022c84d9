// The chaos plugin (plugins/chaos.c), which the soak drives: each behaviour its payload
// names, through a real Pool under the default strict seccomp profile.
#include <catch2/catch.hpp>

#include <string>

#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::wait_running;

TEST_CASE("a chaos task led by e echoes its whole payload") {
  auto pool = make_pool(pool_options("chaos", 1));
  auto r = run(*pool, "chaos", "ehello");
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "ehello");
}

TEST_CASE("a chaos task led by c1 crashes its worker once, then completes on the retry") {
  auto pool = make_pool(pool_options("chaos", 1));
  auto r = run(*pool, "chaos", "c1data");
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "c1data");
  REQUIRE(r.attempts() == 2);
  CHECK(r.history[0].outcome == Outcome::kLost);
  CHECK(r.history[0].error.find("SIGSEGV") != std::string::npos);
  CHECK(r.history[1].worker_pid != r.history[0].worker_pid);
  CHECK(pool->stats().restarts == 1);
}

TEST_CASE("a chaos task led by c9 without retries is dead-lettered after one crash") {
  auto pool = make_pool(pool_options("chaos", 1));
  SubmitOptions so;
  so.retries = 0;
  auto r = run(*pool, "chaos", "c9data", so);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kRetriesExhausted);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kLost);
}

TEST_CASE("a chaos sleeper past its timeout is killed and dead-lettered timed out") {
  auto pool = make_pool(pool_options("chaos", 1));
  SubmitOptions so;
  so.retries = 0;
  so.timeout = 20ms;
  auto r = run(*pool, "chaos", "s60000", so);
  CHECK(r.state == TaskState::kDeadLettered);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  // The pool still serves, on a replacement.
  CHECK(run(*pool, "chaos", "eafter").result == "eafter");
}

TEST_CASE("a chaos sleeper led by s stops when cancelled, and its worker survives") {
  auto pool = make_pool(pool_options("chaos", 1));
  auto t = pool->submit("chaos", "s60000");
  REQUIRE(t);
  wait_running(*t);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(t->cancel());
  REQUIRE(t->wait_for(kPatience));
  const TaskResult r = t->wait();
  CHECK(r.state == TaskState::kCancelled);
  CHECK(r.error == "cancelled");  // the plugin's own answer, not a kill
  CHECK(run(*pool, "chaos", "e").history.at(0).worker_pid == pid);
}

TEST_CASE("a chaos sleeper led by h ignores cancel and is killed after cancel_grace") {
  PoolOptions o = pool_options("chaos", 1);
  o.cancel_grace = 50ms;
  auto pool = make_pool(o);
  auto t = pool->submit("chaos", "h60000");
  REQUIRE(t);
  wait_running(*t);
  const auto pid = pool->workers().at(0).pid;
  REQUIRE(t->cancel());
  REQUIRE(t->wait_for(kPatience));
  const TaskResult r = t->wait();
  CHECK(r.state == TaskState::kCancelled);
  CHECK(r.error != "cancelled");
  CHECK(run(*pool, "chaos", "e").history.at(0).worker_pid != pid);
}

TEST_CASE("a chaos task with a payload it does not know fails permanently, naming the syntax") {
  const std::string payload = GENERATE("", "x", "c", "cx", "s", "s12a", "h-1");
  auto pool = make_pool(pool_options("chaos", 1));
  auto r = run(*pool, "chaos", payload);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  CHECK(r.error.find("chaos:") != std::string::npos);
}
