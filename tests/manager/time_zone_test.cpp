// The schedule's time zones: UTC, and the process zone (`local`) across Berlin's 2026 DST
// changes (spring forward 2026-03-29 02:00 CET -> 03:00 CEST, fall back 2026-10-25 03:00 CEST
// -> 02:00 CET). Each case that needs the process zone sets TZ and calls tzset() first; ctest
// runs each case in its own process, before any thread starts.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <time.h>

#include <cstdint>
#include <string>

#include <sandpool/schedule/cron.hpp>
#include <sandpool/schedule/time_zone.hpp>

namespace {

using sandpool::CivilTime;
using sandpool::CronExpr;

std::int64_t utc(int y, int mo, int d, int h, int mi, int s = 0) {
  return sandpool::civil_as_utc(CivilTime{y, mo, d, h, mi, s});
}

void use_process_zone(const char* tz) {
  REQUIRE(::setenv("TZ", tz, 1) == 0);
  ::tzset();
}

const sandpool::TimeZone& berlin() {
  use_process_zone("Europe/Berlin");
  const auto& zone = sandpool::local_zone();
  // Without tzdata the zone reads as UTC, and every expectation below would be wrong.
  REQUIRE(zone.utc_offset(utc(2026, 1, 1, 0, 0)) == 3600);
  return zone;
}

std::int64_t next(const std::string& text, std::int64_t after, const sandpool::TimeZone& zone) {
  auto e = CronExpr::parse(text);
  REQUIRE(e.is_ok());
  const auto t = e->next_after(after, zone);
  REQUIRE(t.has_value());
  return *t;
}

}  // namespace

TEST_CASE("civil dates convert to days and back across eras and leap days") {
  CHECK(sandpool::days_from_civil(1970, 1, 1) == 0);
  CHECK(sandpool::days_from_civil(2000, 3, 1) == 11017);
  CHECK(sandpool::day_of_week(2026, 3, 29) == 0);  // a Sunday
  CHECK(sandpool::days_in_month(2028, 2) == 29);
  CHECK(sandpool::days_in_month(2100, 2) == 28);
  for (std::int64_t t : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{951782400},
                         utc(2026, 10, 25, 1, 30, 59), utc(8999, 12, 31, 23, 59, 59)}) {
    CHECK(sandpool::civil_as_utc(sandpool::utc_civil(t)) == t);
  }
}

TEST_CASE("a zone is UTC, local or a tz database name, and an unknown one is refused") {
  CHECK((*sandpool::zone_named("UTC"))->name() == "UTC");
  CHECK((*sandpool::zone_named("local"))->name() == "local");
  CHECK((*sandpool::zone_named("Europe/Berlin"))->name() == "Europe/Berlin");
  const auto bad = sandpool::zone_named("Mars/Olympus_Mons");
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(),
             Catch::Equals("unknown time zone \"Mars/Olympus_Mons\": no such zone under " +
                           std::string(sandpool::kDefaultZoneRoot)));
}

TEST_CASE("the local zone reads the process's TZ") {
  const auto& zone = berlin();
  CHECK(zone.utc_offset(utc(2026, 7, 1, 0, 0)) == 7200);
  const CivilTime c = zone.civil(utc(2026, 7, 1, 10, 0));
  CHECK(c == CivilTime{2026, 7, 1, 12, 0, 0});
}

TEST_CASE("a 02:30 slot skipped by spring forward fires once, at the first minute after the gap") {
  const auto& zone = berlin();
  // 2026-03-29 02:30 does not exist in Berlin; 03:00 CEST is 01:00 UTC.
  CHECK(zone.fire_instant(CivilTime{2026, 3, 29, 2, 30, 0}) == utc(2026, 3, 29, 1, 0));
  const std::int64_t before = utc(2026, 3, 28, 23, 0);  // 00:00 CET
  const std::int64_t fired = next("30 2 * * *", before, zone);
  CHECK(fired == utc(2026, 3, 29, 1, 0));
  // Once: the next firing is the next day's 02:30 CEST.
  CHECK(next("30 2 * * *", fired, zone) == utc(2026, 3, 30, 0, 30));
}

TEST_CASE("slots inside the spring-forward gap collapse into one firing at its end") {
  const auto& zone = berlin();
  // */15 from 01:45 CET: 02:00, 02:15, 02:30, 02:45 all fall into the gap -> one firing at
  // 03:00 CEST (01:00 UTC), then 03:15 CEST.
  const std::int64_t t1 = next("*/15 * * * *", utc(2026, 3, 29, 0, 45), zone);
  CHECK(t1 == utc(2026, 3, 29, 1, 0));
  CHECK(next("*/15 * * * *", t1, zone) == utc(2026, 3, 29, 1, 15));
}

TEST_CASE("a slot in the repeated autumn hour fires once, at its first occurrence") {
  const auto& zone = berlin();
  // 02:30 happens twice on 2026-10-25: 00:30 UTC (CEST), then 01:30 UTC (CET).
  CHECK(zone.fire_instant(CivilTime{2026, 10, 25, 2, 30, 0}) == utc(2026, 10, 25, 0, 30));
  const std::int64_t first = next("30 2 * * *", utc(2026, 10, 24, 23, 0), zone);
  CHECK(first == utc(2026, 10, 25, 0, 30));
  // Not again at 01:30 UTC: the next is 2026-10-26 02:30 CET.
  CHECK(next("30 2 * * *", first, zone) == utc(2026, 10, 26, 1, 30));
  // From inside the second pass of the hour, 02:45 (already fired in the first) is skipped.
  CHECK(next("45 2 * * *", utc(2026, 10, 25, 1, 10), zone) == utc(2026, 10, 26, 1, 45));
}

TEST_CASE("an every-minute schedule does not fire the repeated hour's minutes twice") {
  const auto& zone = berlin();
  // From 02:59 CEST (00:59 UTC) the next minute not yet fired is 03:00 CET (02:00 UTC).
  CHECK(next("* * * * *", utc(2026, 10, 25, 0, 59), zone) == utc(2026, 10, 25, 2, 0));
  // Just before the change: 02:58 -> 02:59 CEST.
  CHECK(next("* * * * *", utc(2026, 10, 25, 0, 58), zone) == utc(2026, 10, 25, 0, 59));
}

TEST_CASE("an @every interval ignores the zone's changes") {
  const auto& zone = berlin();
  CHECK(next("@every 1h", utc(2026, 3, 29, 0, 30), zone) == utc(2026, 3, 29, 1, 0));
  CHECK(next("@every 1h", utc(2026, 10, 25, 0, 30), zone) == utc(2026, 10, 25, 1, 0));
}

TEST_CASE("the local zone in UTC fires like the UTC zone") {
  use_process_zone("UTC");
  const std::int64_t from = utc(2026, 3, 29, 0, 45);
  for (const char* text : {"30 2 * * *", "*/15 * * * *", "0 0 1 * *"}) {
    CHECK(next(text, from, sandpool::local_zone()) == next(text, from, sandpool::utc_zone()));
  }
}
