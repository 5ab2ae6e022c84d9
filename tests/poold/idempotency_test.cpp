#include <catch2/catch.hpp>

#include "poold/idempotency.hpp"

using sandpool::poold::IdempotencyKeys;
using namespace std::chrono_literals;

TEST_CASE("idempotency keys: found until evicted by count or age") {
  IdempotencyKeys keys(2, 1000ms);
  const auto t0 = IdempotencyKeys::Clock::time_point{} + 1h;
  keys.remember("a", 1, t0);
  keys.remember("b", 2, t0 + 10ms);
  CHECK(keys.find("a", t0 + 20ms) == 1u);
  CHECK(keys.find("b", t0 + 20ms) == 2u);
  keys.remember("c", 3, t0 + 30ms);  // over two keys: the oldest goes
  CHECK_FALSE(keys.find("a", t0 + 30ms));
  CHECK(keys.find("c", t0 + 30ms) == 3u);
  CHECK(keys.size() == 2);
  CHECK_FALSE(keys.find("b", t0 + 1011ms));  // older than a second
  CHECK(keys.find("c", t0 + 1011ms) == 3u);
}

TEST_CASE("idempotency keys: a key remembered again keeps its newer entry") {
  IdempotencyKeys keys(10, 1000ms);
  const auto t0 = IdempotencyKeys::Clock::time_point{} + 1h;
  keys.remember("a", 1, t0);
  keys.remember("a", 5, t0 + 900ms);
  CHECK(keys.find("a", t0 + 1200ms) == 5u);  // the first entry's expiry does not remove it
}
