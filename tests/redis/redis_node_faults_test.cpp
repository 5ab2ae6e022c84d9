// Redis pools in real poold nodes, where a node's config or a reload meets the stream (issue
// 36): a submit checked as the local pool checks it, and a reload that replaces or removes a
// Redis pool while its old pool still runs tasks it read.
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
  tenant.options.tenant = "a b";
  SubmitRequest slow = task("sleep", "1");
  slow.options.timeout = 60s;
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

// retries 0: a task claimed again after its node let it go ends `retries_exhausted`, and one
// nobody claims never ends. Before, the old pool's feeder was destroyed at once (and, when the
// new one could not start, the old pool read again through a new feeder that knew nothing
// of what the old one held): the ends of what the old pool ran were lost.
TEST_CASE("a reload that replaces or removes a redis pool lets its old pool end what it runs",
          "[redis][cluster]") {
  const std::string how = GENERATE("replaced", "removed", "replaced while redis is down");
  INFO(how);
  RedisServer redis({.password = "", .append_only = true});
  const std::string shared = pool_yaml("shared", "sleep",
                                       "    backend: redis\n"
                                       "    concurrency: 1\n"
                                       "    task_defaults: {timeout: 1m, retries: 0}\n",
                                       "{min: 1, max: 4, initial: 2}");
  const std::string other = pool_yaml("other", "echo");
  PooldFixture node("pools:\n" + shared + other, redis_service(redis, "reloading"));
  Client c = node.connect();
  auto conn = redis::Connection::open(redis.endpoint()).value();
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    SubmitRequest r = task("sleep", "4000");
    r.pool = "shared";
    auto s = c.submit(r);
    REQUIRE(s);
    ids.push_back(s->id);
  }
  REQUIRE(eventually([&] {
    for (std::uint64_t id : ids) {
      auto st = conn.command({"HGET", "sandpool:task:" + std::to_string(id), "state"});
      if (!st || st->str != "running") return false;
    }
    return true;
  }));
  std::string yaml = slurp(node.config);
  const auto at = yaml.find(shared);
  REQUIRE(at != std::string::npos);
  if (how == "removed") {
    yaml.erase(at, shared.size());
  } else {  // declared task types: a new pool (they are kept for life)
    yaml.insert(at + shared.size(), "    task_types: [sleep]\n");
  }
  write_file(node.config, yaml);
  const bool redis_down = how == "replaced while redis is down";
  if (redis_down) redis.shutdown();  // the new pool's feeder cannot start: the reload fails
  auto reloaded = c.reload();
  REQUIRE(reloaded);
  if (how == "removed") {
    CHECK(reloaded->removed == std::vector<std::string>{"shared"});
  } else if (how == "replaced") {
    CHECK(reloaded->replaced == std::vector<std::string>{"shared"});
  } else {
    REQUIRE(reloaded->failed.size() == 1);
    CHECK(reloaded->failed[0].pool == "shared");
    redis.start();
  }
  Client d = node.connect();
  for (std::uint64_t id : ids) {
    auto done = d.wait(id, std::chrono::milliseconds(60000));
    REQUIRE(done);
    INFO(done->account.error);
    CHECK(done->account.state == "completed");
    CHECK(done->account.history.size() == 1);
  }
}

}  // namespace sandpool::testing
