// Redis pools in real poold nodes, where a node's config meets the stream (issue 36): a
// submit checked as the local pool checks it.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "command_runner.hpp"
#include "poold_process.hpp"
#include "redis_server.hpp"
#include "redis_test_support.hpp"

namespace sandpool::testing {
namespace {

using namespace std::chrono_literals;

std::string redis_service(const RedisServer& redis, const std::string& name) {
  return "  node: " + name + "\n  redis: {address: \"unix:" + redis.socket() +
         "\", heartbeat: 200ms}\n";
}

std::int64_t stream_length(redis::Connection& c) {
  std::int64_t n = 0;
  for (const char* band : {"1", "0", "-1"}) {
    auto r = c.command({"XLEN", std::string("sandpool:shared:q:") + band});
    REQUIRE(r);
    n += r->integer;
  }
  return n;
}

}  // namespace

// Before, the Redis submit checked only timeout_ms: the rest went into the stream, where
// every node refused it for ever.
TEST_CASE("a submit to a redis pool is refused as a local submit would be, and adds nothing",
          "[redis][cluster]") {
  RedisServer redis;
  PooldFixture node("pools:\n" + pool_yaml("shared", "sleep",
                                           "    backend: redis\n"
                                           "    limits: {max_payload: 1KiB}\n"
                                           "    task_defaults: {timeout: 5s, max_timeout: 10s}\n"),
                    redis_service(redis, "checks"));
  Client c = node.connect();
  const auto in_pool = [](SubmitRequest r) {
    r.pool = "shared";
    return r;
  };
  SubmitRequest unknown = in_pool(task("nosuch", "1"));
  SubmitRequest big = in_pool(task("sleep", std::string(2048, '1')));
  SubmitRequest tenant = task("sleep", "1");
  tenant.tenant = "a b";
  SubmitRequest slow = task("sleep", "1");
  slow.timeout = 60s;
  const std::vector<std::pair<SubmitRequest, std::string>> refused = {
      {unknown, "unknown task type 'nosuch'"},
      {big, "exceeds max_payload"},
      {tenant, "tenant"},
      {slow, "max_timeout"}};
  for (const auto& [req, why] : refused) {
    INFO(why);
    auto one = c.submit(req);
    REQUIRE_FALSE(one);
    CHECK_THAT(one.status().message(), Catch::Contains(why));
    auto batch = c.submit_batch({req});
    REQUIRE(batch);
    REQUIRE(batch->size() == 1);
    CHECK_FALSE((*batch)[0].status.is_ok());
  }
  auto conn = redis::Connection::open(redis.endpoint()).value();
  CHECK(stream_length(conn) == 0);
  auto ok = c.submit_wait(in_pool(task("sleep", "1")));
  REQUIRE(ok);
  CHECK(ok->account.state == "completed");
}

}  // namespace sandpool::testing
