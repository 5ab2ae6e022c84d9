// Pool::submit checks a task's timeout against 1 ms .. max_timeout (issue 11 item 9): a zero
// or overflowing timeout is refused, nothing is queued, and reconfigure moves the bound. And
// its type against the ones the pool serves, before the type could be interned.
#include <catch2/catch.hpp>

#include "core/interned_types.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::kPatience;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;

namespace {

Result<Ticket> submit_with_timeout(Pool& pool, std::chrono::milliseconds timeout) {
  SubmitOptions so;
  so.timeout = timeout;
  return pool.submit("echo", "x", so);
}

}  // namespace

TEST_CASE("Pool::submit refuses a timeout outside 1 ms .. max_timeout and queues nothing") {
  PoolOptions o = pool_options("echo", 1);
  o.timeout = 5s;
  o.max_timeout = 10s;
  auto pool = make_pool(o);
  for (auto bad : {0ms, -5ms, 10001ms, std::chrono::milliseconds(std::chrono::hours(100000000))}) {
    auto r = submit_with_timeout(*pool, bad);
    INFO(bad.count() << " ms");
    REQUIRE_FALSE(r);
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK(r.status().message() == "timeout: " + std::to_string(bad.count()) +
                                      " ms is outside 1 ms .. 10000 ms (max_timeout)");
  }
  CHECK(pool->stats().submitted == 0);
  for (auto good : {1ms, 10000ms}) {
    auto r = submit_with_timeout(*pool, good);
    REQUIRE(r);
    REQUIRE(r->wait_for(kPatience));
  }
  CHECK(pool->stats().submitted == 2);

  SECTION("a reconfigured max_timeout applies to the next submit") {
    PoolOptions next = o;
    next.max_timeout = 20s;
    REQUIRE(pool->reconfigure(next));
    CHECK(pool->max_timeout() == 20s);
    CHECK(submit_with_timeout(*pool, 15000ms));
    next.max_timeout = 5s;
    REQUIRE(pool->reconfigure(next));
    CHECK_FALSE(submit_with_timeout(*pool, 6000ms));
  }
}

TEST_CASE("made-up task types are refused and intern nothing, and a served one outlives its pool") {
  auto pool = make_pool(pool_options("sleep16", 1));
  CHECK(pool->task_types() == std::vector<std::string>{"sleep.sixteen-ch"});
  const std::uint32_t interned = sandpool::core::interned_type_count();
  std::vector<BatchTask> batch(100);
  for (std::size_t i = 0; i < 1000; ++i) {
    const std::string made_up = "made.up-type-" + std::to_string(i);
    auto r = pool->submit(made_up, "1");
    REQUIRE_FALSE(r);
    CHECK(r.status().code() == Code::kInvalidArgument);
    if (i < batch.size()) batch[i] = BatchTask{made_up, "1", {}};
  }
  for (const Result<Ticket>& r : pool->submit_batch(std::move(batch))) CHECK_FALSE(r);
  CHECK(sandpool::core::interned_type_count() == interned);
  CHECK(pool->stats().submitted == 0);

  auto ticket = pool->submit("sleep.sixteen-ch", "1");
  REQUIRE(ticket);
  REQUIRE(ticket->wait_for(kPatience));
  pool.reset();  // the pool goes; its record stays with the ticket
  const TaskResult r = ticket->wait();
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.type == "sleep.sixteen-ch");
}
