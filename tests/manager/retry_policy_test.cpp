#include <catch2/catch.hpp>

#include <sandpool/pool/pool_options.hpp>

using namespace std::chrono_literals;

TEST_CASE("the retry delay grows exponentially up to its maximum") {
  sandpool::RetryPolicy p;  // 100 ms, x2, 30 s
  auto [attempt, expected] = GENERATE(table<std::uint32_t, std::int64_t>({{1, 100},
                                                                          {2, 200},
                                                                          {3, 400},
                                                                          {4, 800},
                                                                          {9, 25600},
                                                                          {10, 30000},
                                                                          {60, 30000},
                                                                          {5000, 30000}}));
  CHECK(p.ceiling_for(attempt).count() == expected);
}

TEST_CASE("a multiplier below one never shrinks the delay") {
  sandpool::RetryPolicy p;
  p.multiplier = 0.5;
  CHECK(p.ceiling_for(5) == 100ms);
}

TEST_CASE("dispatch strategies parse from and print to their names") {
  for (auto s : sandpool::kDispatchStrategies) {
    CHECK(sandpool::parse_strategy(sandpool::to_string(s)) == s);
  }
  CHECK(sandpool::parse_strategy("least_rss") == sandpool::DispatchStrategy::kLeastRss);
  CHECK(sandpool::parse_strategy("by_key") == sandpool::DispatchStrategy::kByKey);
  CHECK(sandpool::parse_strategy("least_loaded") == sandpool::DispatchStrategy::kLeastLoaded);
  CHECK(sandpool::to_string(sandpool::DispatchStrategy::kByKey) == "by-key");
  CHECK_FALSE(sandpool::parse_strategy("fastest").has_value());
}
