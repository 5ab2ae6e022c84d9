#include <catch2/catch.hpp>

#include <sandpool/service/idempotency.hpp>

using sandpool::TaskResult;
using sandpool::TaskState;
using sandpool::poold::IdempotencyKeys;
using sandpool::poold::IdempotencyLimits;
using namespace std::chrono_literals;

namespace {

const auto t0 = IdempotencyKeys::Clock::time_point{} + 1h;

std::optional<std::uint64_t> id_of(IdempotencyKeys& keys, const std::string& key,
                                   IdempotencyKeys::Clock::time_point now) {
  auto k = keys.find(key, now);
  if (!k) return std::nullopt;
  return k->task_id;
}

TaskResult completed(std::uint64_t id, std::string result) {
  TaskResult r;
  r.id = id;
  r.type = "echo";
  r.state = TaskState::kCompleted;
  r.result = std::move(result);
  return r;
}

}  // namespace

TEST_CASE("idempotency keys: found until evicted by count or age") {
  IdempotencyKeys keys({2, 1000ms, 1u << 20});
  keys.remember("a", 1, t0);
  keys.remember("b", 2, t0 + 10ms);
  CHECK(id_of(keys, "a", t0 + 20ms) == 1u);
  CHECK(id_of(keys, "b", t0 + 20ms) == 2u);
  keys.remember("c", 3, t0 + 30ms);  // over two keys: the oldest goes
  CHECK_FALSE(keys.find("a", t0 + 30ms));
  CHECK(id_of(keys, "c", t0 + 30ms) == 3u);
  CHECK(keys.size() == 2);
  CHECK_FALSE(keys.find("b", t0 + 1011ms));  // older than a second
  CHECK(id_of(keys, "c", t0 + 1011ms) == 3u);
}

TEST_CASE("idempotency keys: a key remembered again keeps its newer entry") {
  IdempotencyKeys keys({10, 1000ms, 1u << 20});
  keys.remember("a", 1, t0);
  keys.remember("a", 5, t0 + 900ms);
  CHECK(id_of(keys, "a", t0 + 1200ms) == 5u);  // the first entry's expiry does not remove it
}

TEST_CASE("idempotency keys: a key keeps its task's final account, whichever came first") {
  IdempotencyKeys keys({10, 1000ms, 1u << 20});
  SECTION("remembered, then ended") {
    keys.remember("a", 7, t0);
    CHECK_FALSE(keys.find("a", t0)->final);
    keys.task_ended("a", completed(7, "seven"), t0 + 1ms);
  }
  SECTION("ended on the loop thread before the request thread remembered it") {
    keys.task_ended("a", completed(7, "seven"), t0);
    keys.remember("a", 7, t0 + 1ms);
  }
  auto kept = keys.find("a", t0 + 2ms);
  REQUIRE(kept);
  CHECK(kept->task_id == 7);
  REQUIRE(kept->final);
  CHECK(kept->final->state == TaskState::kCompleted);
  CHECK(kept->final->result == "seven");
  CHECK_FALSE(kept->result_dropped);
  CHECK(keys.size() == 1);
}

TEST_CASE("idempotency keys: a replayed task's new account replaces the one its key kept") {
  IdempotencyKeys keys({10, 1000ms, 1u << 20});
  keys.remember("a", 7, t0);
  TaskResult dead;
  dead.id = 7;
  dead.state = TaskState::kDeadLettered;
  keys.task_ended("a", dead, t0);
  keys.task_ended(completed(7, "second run"), t0 + 1ms);  // the replay: found by task id
  keys.task_ended(completed(8, "no key names me"), t0 + 1ms);
  auto kept = keys.find("a", t0 + 2ms);
  REQUIRE(kept->final);
  CHECK(kept->final->state == TaskState::kCompleted);
  CHECK(kept->final->result == "second run");
  CHECK(keys.size() == 1);
}

TEST_CASE("idempotency keys: over the byte bound, results go first, oldest first, and say so") {
  IdempotencyKeys keys({100, 0ms, 2500});
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const std::string key = "k" + std::to_string(i);
    keys.remember(key, i, t0);
    keys.task_ended(key, completed(i, std::string(1000, 'x')), t0);
  }
  // 3 x 1000 result bytes (plus the type) is over 2500: the oldest result went.
  auto first = keys.find("k1", t0);
  REQUIRE(first);
  REQUIRE(first->final);
  CHECK(first->result_dropped);
  CHECK(first->final->result.empty());
  CHECK(first->final->state == TaskState::kCompleted);  // the account itself stays
  CHECK_FALSE(keys.find("k2", t0)->result_dropped);
  CHECK(keys.find("k3", t0)->final->result.size() == 1000);
  CHECK(keys.kept_bytes() <= 2500);
  CHECK(keys.size() == 3);

  SECTION("with no result left to drop, whole keys go, oldest first") {
    IdempotencyKeys small({100, 0ms, 100});
    for (std::uint64_t i = 1; i <= 3; ++i) {
      const std::string key = "k" + std::to_string(i);
      small.remember(key, i, t0);
      TaskResult r = completed(i, "");
      r.error = std::string(40, 'e');
      small.task_ended(key, r, t0);
    }
    CHECK_FALSE(small.find("k1", t0));
    CHECK(small.find("k3", t0));
    CHECK(small.kept_bytes() <= 100);
  }
}
