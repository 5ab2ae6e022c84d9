// A Redis pool's idempotency-key matches answered as a local pool's are (docs/protocol.md,
// docs/redis-pools.md): a resubmit under a key gets the first task's id with `existing`, with
// `wait` in the `accepted` event too, and a batch lists the indexes whose key matched (an
// earlier task's, or one earlier in the batch). A real poold, a real redis-server.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "poold_process.hpp"
#include "redis_server.hpp"

namespace sandpool::testing {
namespace redis_existing_test {

// One node serving the echo pool `shared` through `redis`.
struct EchoNode : PooldFixture {
  explicit EchoNode(const RedisServer& redis)
      : PooldFixture("pools:\n" + pool_yaml("shared", "echo", "    backend: redis\n"),
                     "  node: ea\n  redis: {address: \"unix:" + redis.socket() +
                         "\", heartbeat: 200ms}\n") {}
};

SubmitRequest keyed(const std::string& payload, const std::string& key) {
  SubmitRequest r = task("echo", payload);
  r.pool = "shared";
  r.options.idempotency_key = key;
  return r;
}

// The `accepted` event of a waited submit of `r` sent as is, and the final reply's state.
struct Waited {
  std::optional<nlohmann::json> accepted;
  std::string state;
};

Waited submit_waited(Client& c, const SubmitRequest& r) {
  ops::SubmitArgs args;
  args.type = r.type;
  args.pool = r.pool;
  args.options = r.options;
  args.wait = true;
  Waited out;
  auto reply = raw_call_streaming(c, "submit", ops::encode(args), r.payload, [&](const Reply& e) {
    if (e.body.value("event", "") == "accepted") {
      out.accepted = e.body;
    }
  });
  REQUIRE(reply);
  out.state = reply->body.value("state", "");
  return out;
}

}  // namespace redis_existing_test

using namespace redis_existing_test;

TEST_CASE("a redis pool's submit answers existing for an idempotency key that matched",
          "[redis][cluster][idempotency]") {
  RedisServer redis;
  EchoNode node(redis);
  Client c = node.connect();

  auto first = c.submit(keyed("one", "order-1"));
  REQUIRE(first);
  CHECK_FALSE(first->existing);
  auto again = c.submit(keyed("one again", "order-1"));
  REQUIRE(again);
  CHECK(again->id == first->id);
  CHECK(again->existing);
  auto other = c.submit(keyed("two", "order-2"));
  REQUIRE(other);
  CHECK(other->id != first->id);
  CHECK_FALSE(other->existing);

  // Waited: the accepted event says it, and the wait ends with the first task's end.
  const Waited matched = submit_waited(c, keyed("one, waited", "order-1"));
  REQUIRE(matched.accepted);
  CHECK((*matched.accepted)["id"] == first->id);
  CHECK((*matched.accepted)["existing"] == true);
  CHECK(matched.state == "completed");
  const Waited fresh = submit_waited(c, keyed("three", "order-3"));
  REQUIRE(fresh.accepted);
  CHECK((*fresh.accepted)["id"] != first->id);
  CHECK((*fresh.accepted)["existing"] == false);
  CHECK(fresh.state == "completed");
}

TEST_CASE("a redis pool's batch lists the indexes whose idempotency key matched",
          "[redis][cluster][idempotency]") {
  RedisServer redis;
  EchoNode node(redis);
  Client c = node.connect();

  auto before = c.submit(keyed("a", "order-1"));
  REQUIRE(before);
  // 0: new; 1: order-1's, submitted before; 2: no key; 3: index 0's key, earlier in the batch.
  auto batch = c.submit_batch(
      {keyed("b", "order-2"), keyed("c", "order-1"), keyed("d", ""), keyed("e", "order-2")});
  REQUIRE(batch);
  REQUIRE(batch->size() == 4);
  for (const Submitted& s : *batch) REQUIRE(s.status.is_ok());
  const std::vector<bool> existing = {(*batch)[0].existing, (*batch)[1].existing,
                                      (*batch)[2].existing, (*batch)[3].existing};
  CHECK(existing == std::vector<bool>{false, true, false, true});
  CHECK((*batch)[1].id == before->id);
  CHECK((*batch)[3].id == (*batch)[0].id);
  CHECK((*batch)[0].id != before->id);
  CHECK((*batch)[2].id != (*batch)[0].id);

  // On the wire: `existing` is the list of those indexes.
  nlohmann::json args = {
      {"payload_lens", {1, 1}},
      {"tasks",
       {{{"type", "echo"}, {"pool", "shared"}, {"idempotency_key", "order-3"}},
        {{"type", "echo"}, {"pool", "shared"}, {"idempotency_key", "order-1"}}}}};
  auto raw = raw_body(c, "submit_batch", args, "fg");
  REQUIRE(raw);
  CHECK((*raw)["existing"] == nlohmann::json::array({1}));
  CHECK((*raw)["ids"][1] == before->id);
}

}  // namespace sandpool::testing
