#include <catch2/catch.hpp>

#include <chrono>

#include "core/flow_gates.hpp"

using sandpool::FlowLimits;
using sandpool::RateLimit;
using sandpool::SubmitOptions;
using sandpool::core::FlowGates;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;
using sandpool::core::TokenBucket;

namespace {
constexpr std::int64_t kGateMs = 1000000;

TaskPtr gated_task(std::uint64_t id, std::string type, std::string tenant = {}) {
  SubmitOptions o;
  o.tenant = std::move(tenant);
  return TaskRecord::make(id, std::move(type), "", o);
}
}  // namespace

TEST_CASE("a token bucket gives its burst at once, then one token per interval's share") {
  TokenBucket b(RateLimit{10, std::chrono::milliseconds(1000), 2}, 0);
  CHECK(b.ready(0));
  b.take(0);
  b.take(0);
  CHECK_FALSE(b.ready(0));
  CHECK(b.ready_at(0) == 100 * kGateMs);  // 10 per second: one every 100 ms
  CHECK_FALSE(b.ready(99 * kGateMs));
  CHECK(b.ready(100 * kGateMs));
  CHECK(b.whole(10000 * kGateMs) == 2);  // never above the burst
}

TEST_CASE("a type's cap holds its tasks while that many are dispatched, then lets one through") {
  FlowGates g;
  FlowLimits f;
  f.type_concurrency["resize"] = 1;
  g.configure(f, 0, {});
  TaskPtr first = gated_task(1, "resize"), second = gated_task(2, "resize");
  TaskPtr other = gated_task(3, "echo");
  REQUIRE(g.closed(*first, 0) == nullptr);
  g.dispatched(*first, 0);
  FlowGates::Gate* gate = g.closed(*second, 0);
  REQUIRE(gate != nullptr);
  CHECK(g.closed(*other, 0) == nullptr);  // another type is not held
  g.park(*gate, second, 0);
  CHECK(g.parked() == 1);
  CHECK(g.release(0).empty());  // the slot is still taken
  g.left_ring(*first);
  CHECK(g.next_ns() <= 0);  // a freed slot asks for a look at once
  auto back = g.release(0);
  REQUIRE(back.size() == 1);
  CHECK(back[0]->id == 2);
  CHECK(g.parked() == 0);
}

TEST_CASE("a tenant's rate limit holds that tenant's tasks only, until its bucket refills") {
  FlowGates g;
  FlowLimits f;
  f.tenants["acme"] = RateLimit{1, std::chrono::milliseconds(50), 0};
  g.configure(f, 0, {});
  TaskPtr a1 = gated_task(1, "t", "acme"), a2 = gated_task(2, "t", "acme");
  TaskPtr b = gated_task(3, "t", "other");
  REQUIRE(g.closed(*a1, 0) == nullptr);
  g.dispatched(*a1, 0);
  FlowGates::Gate* gate = g.closed(*a2, 0);
  REQUIRE(gate != nullptr);
  CHECK(g.closed(*b, 0) == nullptr);
  g.park(*gate, a2, 0);
  CHECK(g.next_ns() == 50 * kGateMs);
  CHECK(g.release(49 * kGateMs).empty());
  CHECK(g.release(50 * kGateMs).size() == 1);
  CHECK(g.remove(a2) == false);  // gone from the gate already
}

TEST_CASE("a pool without limits has no gate on") {
  FlowGates g;
  g.configure(FlowLimits{}, 0, {});
  CHECK_FALSE(g.on());
  FlowLimits f;
  f.pool = RateLimit{5, std::chrono::milliseconds(1000), 0};
  g.configure(f, 0, {});
  CHECK(g.on());
}
