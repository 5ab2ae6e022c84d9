// The cron parser and its next-slot search in UTC (the zone tests are time_zone_test.cpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <sandpool/schedule/cron.hpp>

namespace {

using sandpool::CivilTime;
using sandpool::CronExpr;

std::int64_t at(int y, int mo, int d, int h, int mi, int s = 0) {
  return sandpool::civil_as_utc(CivilTime{y, mo, d, h, mi, s});
}

CronExpr parsed(const std::string& text) {
  auto e = CronExpr::parse(text);
  INFO(text << ": " << e.status().to_string());
  REQUIRE(e.is_ok());
  return *e;
}

std::int64_t next_utc(const std::string& text, std::int64_t after, std::int64_t anchor = 0) {
  const auto t = parsed(text).next_after(after, sandpool::utc_zone(), anchor);
  REQUIRE(t.has_value());
  return *t;
}

}  // namespace

TEST_CASE("a cron expression's next slot is its first matching minute after the instant") {
  // 2026-05-13 is a Wednesday.
  const std::int64_t from = at(2026, 5, 13, 10, 7, 30);
  auto [text, y, mo, d, h, mi] = GENERATE(table<std::string, int, int, int, int, int>({
      {"* * * * *", 2026, 5, 13, 10, 8},
      {"*/1 * * * *", 2026, 5, 13, 10, 8},
      {"*/15 * * * *", 2026, 5, 13, 10, 15},
      {"7 * * * *", 2026, 5, 13, 11, 7},
      {"0 9 * * *", 2026, 5, 14, 9, 0},
      {"5,10-12,50 * * * *", 2026, 5, 13, 10, 10},
      {"30 8-18/2 * * *", 2026, 5, 13, 10, 30},
      {"0 0 1 * *", 2026, 6, 1, 0, 0},
      {"0 0 1 jan *", 2027, 1, 1, 0, 0},
      {"0 12 * JUN-aug *", 2026, 6, 1, 12, 0},
      {"0 9 * * mon-fri", 2026, 5, 14, 9, 0},
      {"0 9 * * sat,sun", 2026, 5, 16, 9, 0},
      {"0 9 * * 7", 2026, 5, 17, 9, 0},  // 7 is Sunday, as 0
      {"0 9 * * 0", 2026, 5, 17, 9, 0},
      {"0 0 29 2 *", 2028, 2, 29, 0, 0},  // the next leap day
      {"20/20 * * * *", 2026, 5, 13, 10, 20},
      {"@hourly", 2026, 5, 13, 11, 0},
      {"@daily", 2026, 5, 14, 0, 0},
      {"@midnight", 2026, 5, 14, 0, 0},
      {"@weekly", 2026, 5, 17, 0, 0},
      {"@monthly", 2026, 6, 1, 0, 0},
      {"@yearly", 2027, 1, 1, 0, 0},
      {"@ANNUALLY", 2027, 1, 1, 0, 0},
  }));
  INFO(text);
  CHECK(next_utc(text, from) == at(y, mo, d, h, mi));
}

TEST_CASE("a slot is strictly after the instant: on the slot itself the next one is chosen") {
  CHECK(next_utc("*/5 * * * *", at(2026, 1, 1, 0, 5)) == at(2026, 1, 1, 0, 10));
  CHECK(next_utc("*/5 * * * *", at(2026, 1, 1, 0, 5) - 1) == at(2026, 1, 1, 0, 5));
  CHECK(next_utc("59 23 31 12 *", at(2026, 12, 31, 23, 59)) == at(2027, 12, 31, 23, 59));
}

TEST_CASE("every minute of a day is a slot of * * * * *, and nothing between") {
  const auto e = parsed("* * * * *");
  std::int64_t t = at(2026, 2, 28, 0, 0);
  for (int i = 0; i < 24 * 60 * 2; ++i) {
    const auto next = e.next_after(t, sandpool::utc_zone());
    REQUIRE(next.has_value());
    REQUIRE(*next == t + 60);
    t = *next;
  }
  CHECK(t == at(2026, 3, 2, 0, 0));  // 2026 is no leap year
}

TEST_CASE("both day fields restricted: a day matching either fires (Vixie's rule)") {
  // The 13th or any Friday: from Monday 2026-05-11, Wednesday the 13th, then Friday the 15th.
  CHECK(next_utc("0 0 13 * fri", at(2026, 5, 11, 0, 0)) == at(2026, 5, 13, 0, 0));
  CHECK(next_utc("0 0 13 * fri", at(2026, 5, 13, 0, 0)) == at(2026, 5, 15, 0, 0));
}

TEST_CASE("a day field led by * makes the two day fields both apply (Vixie's rule)") {
  // Odd days (*/2 from 1) that are Fridays: 2026-05-01 is one, then 2026-05-15, 05-29.
  CHECK(next_utc("0 0 */2 * fri", at(2026, 5, 1, 0, 0)) == at(2026, 5, 15, 0, 0));
  // dow * : the day-of-month alone decides.
  CHECK(next_utc("0 0 13 * *", at(2026, 5, 11, 0, 0)) == at(2026, 5, 13, 0, 0));
  // A *-led day-of-month: the weekday decides, Friday 2026-02-13 after Saturday the 7th.
  CHECK(next_utc("0 0 * 2 fri", at(2026, 2, 7, 0, 0)) == at(2026, 2, 13, 0, 0));
}

TEST_CASE("an @every slot is anchor + k * interval, the Unix epoch when no anchor is given") {
  auto [text, seconds] = GENERATE(table<std::string, std::int64_t>({{"@every 30s", 30},
                                                                    {"@every 5m", 300},
                                                                    {"@every 1h30m", 5400},
                                                                    {"@every 2d", 172800},
                                                                    {"@every 1d2h3m4s", 93784},
                                                                    {"@every 366d", 366 * 86400},
                                                                    {"@EVERY   1s", 1}}));
  INFO(text);
  const auto e = parsed(text);
  CHECK(e.interval() == seconds);
  const std::int64_t t = at(2026, 5, 13, 10, 7, 31);
  CHECK(*e.next_after(t, sandpool::utc_zone()) == (t / seconds + 1) * seconds);
  const std::int64_t anchor = t - 7;
  CHECK(*e.next_after(t, sandpool::utc_zone(), anchor) == anchor + (7 / seconds + 1) * seconds);
  CHECK(*e.next_after(anchor - 100, sandpool::utc_zone(), anchor) == anchor);
}

TEST_CASE("@every 2s fires on every even second") {
  const auto e = parsed("@every 2s");
  CHECK(*e.next_after(1000, sandpool::utc_zone()) == 1002);
  CHECK(*e.next_after(1001, sandpool::utc_zone()) == 1002);
}

TEST_CASE("a bad expression is refused with the field and the position named") {
  auto [text, message] = GENERATE(table<std::string, std::string>({
      {"61 * * * *", "minute field, position 1: 61 is out of range 0-59"},
      {"0 24 * * *", "hour field, position 3: 24 is out of range 0-23"},
      {"0 0 0 * *", "day-of-month field, position 5: 0 is out of range 1-31"},
      {"0 0 * 13 *", "month field, position 7: 13 is out of range 1-12"},
      {"0 0 * * 8", "day-of-week field, position 9: 8 is out of range 0-7"},
      {"1,,2 * * * *", "minute field, position 3: empty list item"},
      {"*/0 * * * *", "minute field, position 3: step 0 is out of range 1-60"},
      {"*/61 * * * *", "minute field, position 3: step 61 is out of range 1-60"},
      {"5-2 * * * *", "minute field, position 1: range 5-2 runs backwards"},
      {"0 0 * foo *", "month field, position 7: unknown name \"foo\""},
      {"0 0 * * mon-", "day-of-week field, position 13: a number is missing at the end"},
      {"0 x * * *", "hour field, position 3: \"x\" is not a number"},
      {"0 0 * * 1#2", "day-of-week field, position 10: unexpected '#'"},
      {"0 0 L * *", "day-of-month field, position 5: \"l\" is not a number"},
      {"0 0 * *", "day-of-week field, position 8: missing"},
      {"0 0 * * * *", "position 11: more than 5 fields"},
      {"0 0 31 2 *", "day-of-month field, position 5: no chosen day occurs"},
      {"0 0 30,31 feb *", "day-of-month field, position 5: no chosen day occurs"},
      {"@every 0s", "@every duration, position 8: shorter than 1s"},
      {"@every 367d", "@every duration, position 8: longer than 366d"},
      {"@every 30", "@every duration, position 10: a unit (d, h, m or s) is missing"},
      {"@every 30m1h", "@every duration, position 12: unit 'h' is not d, h, m or s"},
      {"@every 5x", "@every duration, position 9: unit 'x'"},
      {"@every", "@every, position 7: expected one duration"},
      {"@every 1s 2s", "@every, position 11: expected one duration"},
      {"@hourly 5", "@hourly, position 9: a macro takes nothing after it"},
      {"@fortnightly", "position 1: unknown macro \"@fortnightly\""},
      {"", "empty cron expression"},
      {"   ", "empty cron expression"},
      {std::string(300, '*'), "longer than 256 characters"},
      {"99999999999999999999 * * * *", "minute field, position 1: 999999 is out of range 0-59"},
  }));
  INFO(text);
  const auto e = CronExpr::parse(text);
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.status().code() == sandpool::Code::kInvalidArgument);
  CHECK_THAT(e.status().message(), Catch::Contains(message));
}

TEST_CASE("both day fields restricted never make an expression impossible") {
  // Feb 31 never occurs, but every Monday does (Vixie's OR).
  CHECK(next_utc("0 0 31 2 mon", at(2026, 2, 1, 0, 0)) == at(2026, 2, 2, 0, 0));
}

TEST_CASE("the text of an expression is kept trimmed, a macro's as written") {
  CHECK(parsed("  */5 * * * *\t").text() == "*/5 * * * *");
  CHECK(parsed("@daily").text() == "@daily");
  CHECK(parsed("@daily").interval() == 0);
}

TEST_CASE("an instant out of the searchable range has no next slot") {
  CHECK_FALSE(parsed("* * * * *").next_after(-1, sandpool::utc_zone()).has_value());
  CHECK_FALSE(
      parsed("@every 1s").next_after(std::int64_t{1} << 62, sandpool::utc_zone()).has_value());
}

TEST_CASE("durations read as d h m s in that order") {
  CHECK(*sandpool::parse_every_duration("90s") == 90);
  CHECK(*sandpool::parse_every_duration("1h") == 3600);
  CHECK_FALSE(sandpool::parse_every_duration("1m1m").is_ok());
  CHECK_FALSE(sandpool::parse_every_duration("").is_ok());
  CHECK_FALSE(sandpool::parse_every_duration("-5s").is_ok());
}
