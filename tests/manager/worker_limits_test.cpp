// The RLIMIT_CPU a pool's workers get (worker_cpu_seconds): the lifetime backstop derived
// from the pool's timeouts, the one number the worker's rlimit and the pool's recycling share.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>

#include <sandpool/pool/pool_options.hpp>

using sandpool::PoolOptions;
using sandpool::worker_cpu_seconds;
using namespace std::chrono_literals;

TEST_CASE("a pool's workers get ten attempts' worth of CPU as their lifetime limit") {
  struct Case {
    std::chrono::milliseconds timeout, cpu_time;
    std::uint64_t seconds;
  };
  const Case c = GENERATE(Case{30s, 0ms, 300},     // the defaults
                          Case{30s, 45s, 450},     // a CPU budget above the timeout
                          Case{60s, 10s, 600},     // the timeout above the CPU budget
                          Case{2500ms, 0ms, 60},   // 3 s rounded up, times 10: the floor wins
                          Case{100ms, 0ms, 60},    // the floor
                          Case{7s, 7001ms, 80},    // whole seconds, rounded up
                          Case{6001ms, 0ms, 70});  // ... 7 s
  PoolOptions o;
  o.timeout = c.timeout;
  o.cpu_time = c.cpu_time;
  INFO("timeout " << c.timeout.count() << " ms, cpu_time " << c.cpu_time.count() << " ms");
  CHECK(worker_cpu_seconds(o) == c.seconds);
}

TEST_CASE("the defaults give every worker 300 s of CPU") {
  CHECK(worker_cpu_seconds(PoolOptions{}) == 300);
}

TEST_CASE("a lifetime CPU limit set in the pool's sandbox is taken as it is") {
  PoolOptions o;
  o.sandbox.limits.cpu_seconds = 7;
  CHECK(worker_cpu_seconds(o) == 7);
}

TEST_CASE("the largest timeout there is still gives a limit ten times its seconds") {
  PoolOptions o;
  o.timeout = std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max());
  CHECK(worker_cpu_seconds(o) == 92233720368547760ull);  // ceil(9223372036854775.807) x 10
}
