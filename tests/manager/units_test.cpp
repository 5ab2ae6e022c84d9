#include <catch2/catch.hpp>

#include <sandpool/units/units.hpp>

TEST_CASE("durations take human units, and a bare number is seconds") {
  auto [text, ms] = GENERATE(table<const char*, std::int64_t>({{"500ms", 500},
                                                               {"2s", 2000},
                                                               {"1m", 60000},
                                                               {"1.5s", 1500},
                                                               {"3", 3000},
                                                               {"0", 0},
                                                               {"2h", 7200000}}));
  auto d = sandpool::parse_duration(text);
  REQUIRE(d);
  CHECK(d->count() == ms);
}

TEST_CASE("a malformed duration is an error that quotes it") {
  auto text = GENERATE("", "fast", "-1s", "10parsecs", "s");
  auto d = sandpool::parse_duration(text);
  REQUIRE_FALSE(d);
  CHECK(d.status().message().find(std::string("'") + text + "'") != std::string::npos);
}

TEST_CASE("with no bare unit a duration needs its unit, except zero") {
  const auto no_bare = std::chrono::milliseconds(0);
  CHECK(sandpool::parse_duration("0", no_bare)->count() == 0);
  CHECK(sandpool::parse_duration("30s", no_bare)->count() == 30000);
  auto bare = sandpool::parse_duration("30", no_bare);
  REQUIRE_FALSE(bare);
  CHECK(bare.status().message().find("unit is required") != std::string::npos);
}

TEST_CASE("sizes take binary and decimal units") {
  auto [text, bytes] = GENERATE(table<const char*, std::uint64_t>({{"512", 512},
                                                                   {"64KiB", 65536},
                                                                   {"256MiB", 268435456},
                                                                   {"1GiB", 1073741824},
                                                                   {"10MB", 10000000},
                                                                   {"1.5KiB", 1536}}));
  auto s = sandpool::parse_size(text);
  REQUIRE(s);
  CHECK(*s == bytes);
}

TEST_CASE("a malformed size is an error") {
  auto text = GENERATE("", "lots", "12 parsecs", "-5");
  CHECK_FALSE(sandpool::parse_size(text));
}
