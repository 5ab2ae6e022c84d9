// Named time zones from the tz database: their offsets against glibc's (localtime_r in a
// child process with TZ set) over centuries and past the files' last transitions, cron
// slots around DST changes, and the names and files a ZoneDatabase refuses.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/schedule/cron.hpp>
#include <sandpool/schedule/time_zone.hpp>
#include <sandpool/schedule/tzif.hpp>

#include "zone_test_support.hpp"

// A namespace of its own: the unity build joins this file with the other zone tests.
namespace sandpool::named_zone_test {
namespace {

using sandpool::CivilTime;
using sandpool::CronExpr;
using sandpool::TimeZone;
using sandpool::testing::build_tzif;
using sandpool::testing::glibc_offsets;
using sandpool::testing::PublicDir;
using sandpool::testing::put_zone;
using sandpool::testing::run_in_child;
using sandpool::testing::TzifParts;

std::int64_t utc(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) {
  return sandpool::civil_as_utc(CivilTime{y, mo, d, h, mi, s});
}

const TimeZone& named(const std::string& name) {
  auto zone = sandpool::zone_named(name);
  INFO(zone.status().message());
  REQUIRE(zone.is_ok());
  return **zone;
}

std::int64_t next(const std::string& text, std::int64_t after, const TimeZone& zone) {
  auto e = CronExpr::parse(text);
  REQUIRE(e.is_ok());
  const auto t = e->next_after(after, zone);
  REQUIRE(t.has_value());
  return *t;
}

// The first `count` slots of `text` after `after`.
std::vector<std::int64_t> slots(const std::string& text, std::int64_t after, int count,
                                const TimeZone& zone) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < count; ++i) out.push_back(after = next(text, after, zone));
  return out;
}

// The same slots computed in a child process whose own zone (TZ=`name`, read by glibc)
// is the `local` zone: the named zone must fire exactly where glibc's reading does.
std::vector<std::int64_t> glibc_slots(const std::string& name, const std::string& text,
                                      std::int64_t after, int count) {
  auto e = CronExpr::parse(text);
  REQUIRE(e.is_ok());
  return run_in_child([&] {
    if (::setenv("TZ", name.c_str(), 1) != 0) ::_exit(2);
    ::tzset();
    std::vector<std::int64_t> out;
    std::int64_t t = after;
    for (int i = 0; i < count; ++i) {
      const auto n = e->next_after(t, sandpool::local_zone());
      if (!n) ::_exit(3);
      out.push_back(t = *n);
    }
    return out;
  });
}

}  // namespace

TEST_CASE("named zones give glibc's offsets from 1850 to 2200 and at every transition") {
  const std::string name = GENERATE(as<std::string>{}, "Europe/Berlin", "America/New_York",
                                    "Australia/Lord_Howe", "Asia/Kolkata", "Asia/Tehran",
                                    "America/Nuuk", "Pacific/Chatham", "America/Sao_Paulo");
  const TimeZone& zone = named(name);
  CHECK(zone.name() == name);
  std::vector<std::int64_t> at;
  for (std::int64_t t = utc(1850, 1, 1); t < utc(2200, 1, 1); t += 7 * 86400 + 3599) {
    at.push_back(t);
  }
  // Each half hour of 2026 and of 2050 (past the last transition of a "fat" file: the
  // footer's rule), and the second before each.
  for (const int year : {2026, 2050}) {
    for (std::int64_t t = utc(year, 1, 1); t < utc(year + 1, 1, 1); t += 1800) {
      at.insert(at.end(), {t - 1, t});
    }
  }
  // Each transition of the file and the seconds around it.
  const auto tzif = sandpool::parse_tzif(
      sandpool::testing::read_file_bytes(std::string(sandpool::kDefaultZoneRoot) + "/" + name));
  REQUIRE(tzif.is_ok());
  for (const std::int64_t t : tzif->transitions) at.insert(at.end(), {t - 1, t, t + 1});
  sandpool::testing::check_offsets(name, zone, at, glibc_offsets(name, at).data());
}

TEST_CASE("every zone of the system's tz database reads as glibc reads it") {
  // Every TZif file under the root (aliases included; not right/, the leap-second tree
  // this reader refuses), each compared at a half hour of every month, 1900-2100 (the day
  // and hour move from month to month).
  std::vector<std::string> names;
  const std::filesystem::path root(sandpool::kDefaultZoneRoot);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string name = entry.path().lexically_relative(root).string();
    if (name.rfind("right", 0) == 0 || !entry.is_regular_file()) continue;
    if (sandpool::testing::read_file_bytes(entry.path().string()).rfind("TZif", 0) != 0) continue;
    // UTC is built in; localtime links out of the root (to /etc/localtime), refused.
    if (name != "UTC" && name != "localtime") names.push_back(name);
  }
  REQUIRE(names.size() > 300);  // Debian's tzdata holds about 600 names
  std::vector<std::int64_t> at;
  for (int year = 1900; year < 2100; ++year) {
    for (int month = 1; month <= 12; ++month) {
      at.push_back(utc(year, month, 1 + (year + month) % 28, (year * 7 + month) % 24, 30));
    }
  }
  const auto expected = glibc_offsets(names, at);
  for (std::size_t z = 0; z < names.size(); ++z) {
    const auto zone = sandpool::zone_named(names[z]);
    INFO(names[z] << ": " << zone.status().message());
    REQUIRE(zone.is_ok());
    sandpool::testing::check_offsets(names[z], **zone, at, &expected[z * at.size()]);
  }
}

TEST_CASE("a named zone's cron slots around DST are those of glibc's zone, in 2026 and 2050") {
  const auto [name, text, from] = GENERATE(table<std::string, std::string, std::int64_t>({
      {"Europe/Berlin", "30 2 * * *", utc(2026, 3, 20)},
      {"Europe/Berlin", "30 2 * * *", utc(2026, 10, 20)},
      {"Europe/Berlin", "*/15 * * * *", utc(2026, 3, 28, 23)},
      {"Europe/Berlin", "*/15 * * * *", utc(2026, 10, 24, 23)},
      {"Europe/Berlin", "30 2 * * *", utc(2050, 3, 20)},  // the footer's rule
      {"America/New_York", "30 2 * * *", utc(2026, 3, 1)},
      {"America/New_York", "*/10 1-3 * * *", utc(2026, 10, 31)},
      {"America/New_York", "0 * * * *", utc(2050, 11, 5)},
      {"Australia/Lord_Howe", "*/15 1-2 * * *", utc(2026, 4, 4)},
      {"Australia/Lord_Howe", "*/15 1-3 * * *", utc(2026, 10, 3)},
      {"Australia/Lord_Howe", "15 2 * * *", utc(2050, 9, 28)},
      {"Asia/Kolkata", "30 2 * * *", utc(2026, 3, 28)},
  }));
  CAPTURE(name, text, from);
  CHECK(slots(text, from, 40, named(name)) == glibc_slots(name, text, from, 40));
}

TEST_CASE("Europe/Berlin: a 02:30 slot in the spring gap fires at 03:00, the repeated one once") {
  const TimeZone& berlin = named("Europe/Berlin");
  // 2026-03-29 02:30 does not exist; 03:00 CEST is 01:00 UTC, and the next day's is 00:30.
  const std::int64_t spring = next("30 2 * * *", utc(2026, 3, 28, 23), berlin);
  CHECK(spring == utc(2026, 3, 29, 1, 0));
  CHECK(next("30 2 * * *", spring, berlin) == utc(2026, 3, 30, 0, 30));
  // 2026-10-25 02:30 happens at 00:30 UTC (CEST) and 01:30 UTC (CET): it fires at the first.
  const std::int64_t autumn = next("30 2 * * *", utc(2026, 10, 24, 23), berlin);
  CHECK(autumn == utc(2026, 10, 25, 0, 30));
  CHECK(next("30 2 * * *", autumn, berlin) == utc(2026, 10, 26, 1, 30));
}

TEST_CASE("Australia/Lord_Howe's half-hour DST: a gap of 30 minutes and a repeated half hour") {
  const TimeZone& howe = named("Australia/Lord_Howe");
  // 2026-10-04 02:00 +1030 becomes 02:30 +11: 02:15 fires at 02:30 +11 (15:30 UTC).
  CHECK(howe.fire_instant(CivilTime{2026, 10, 4, 2, 15, 0}) == utc(2026, 10, 3, 15, 30));
  // 2026-04-05 02:00 +11 becomes 01:30 +1030: 01:45 fires once, at +11 (14:45 UTC).
  CHECK(howe.fire_instant(CivilTime{2026, 4, 5, 1, 45, 0}) == utc(2026, 4, 4, 14, 45));
  CHECK(howe.utc_offset(utc(2026, 7, 1)) == 37800);
  CHECK(howe.utc_offset(utc(2026, 12, 1)) == 39600);
}

TEST_CASE("Asia/Kolkata has no DST: 02:30 is 21:00 UTC the day before all year") {
  const TimeZone& kolkata = named("Asia/Kolkata");
  for (const int month : {1, 3, 4, 10, 11}) {
    CHECK(next("30 2 * * *", utc(2026, month, 1, 12), kolkata) == utc(2026, month, 1, 21, 0));
  }
}

TEST_CASE("a zone name is only a tz database name") {
  const PublicDir root;
  const sandpool::ZoneDatabase zones(root.path());
  const std::string name = GENERATE(
      as<std::string>{}, "", "../etc/passwd", "/etc/passwd", "Europe/../../etc/passwd",
      "Europe//Berlin", "Europe/", "Europe/Berlin\n", "Europe Berlin", ".", "a\\b", "Zone%2F",
      std::string(sandpool::kMaxZoneName + 1, 'A'), std::string("Europe/Berlin\0x", 15));
  CAPTURE(name);
  const auto zone = zones.zone(name);
  REQUIRE_FALSE(zone.is_ok());
  CHECK_THAT(zone.status().message(), Catch::StartsWith("unknown time zone: a time zone name"));
}

TEST_CASE("zones are read beneath their database's root and nowhere else") {
  const PublicDir root;
  TzifParts parts;
  parts.type_offsets = {19800};
  parts.footer = "IST-5:30";
  put_zone(root, "Test/Zone", build_tzif(parts));
  REQUIRE(::symlink("Test/Zone", (root.path() + "/Alias").c_str()) == 0);
  REQUIRE(::symlink("/usr/share/zoneinfo/Europe/Berlin", (root.path() + "/Out").c_str()) == 0);
  REQUIRE(::symlink("../../usr/share/zoneinfo/Asia/Kolkata", (root.path() + "/Test/Up").c_str()) ==
          0);
  const sandpool::ZoneDatabase zones(root.path());
  CHECK(zones.root() == root.path());

  auto zone = zones.zone("Test/Zone");
  REQUIRE(zone.is_ok());
  CHECK((*zone)->name() == "Test/Zone");
  CHECK((*zone)->utc_offset(utc(2026, 1, 1)) == 19800);
  auto alias = zones.zone("Alias");
  REQUIRE(alias.is_ok());
  CHECK((*alias)->utc_offset(utc(2026, 1, 1)) == 19800);
  // The same name twice is the same cached zone.
  CHECK(*zones.zone("Test/Zone") == *zone);

  for (const char* outside : {"Out", "Test/Up"}) {
    CAPTURE(outside);
    const auto refused = zones.zone(outside);
    REQUIRE_FALSE(refused.is_ok());
    CHECK_THAT(refused.status().message(), Catch::Contains("RESOLVE_BENEATH"));
  }
  // The system's zones are not this database's.
  CHECK_THAT(
      zones.zone("Europe/Berlin").status().message(),
      Catch::Equals("unknown time zone \"Europe/Berlin\": no such zone under " + root.path()));
  // UTC and local are built in whatever the root holds.
  CHECK((*zones.zone("UTC"))->name() == "UTC");
  CHECK((*zones.zone("local"))->name() == "local");
}

TEST_CASE("a zone that is a directory, a FIFO, too large or not TZif is refused by name") {
  const PublicDir root;
  std::filesystem::create_directories(root.path() + "/Dir/Sub");
  REQUIRE(::mkfifo((root.path() + "/Fifo").c_str(), 0644) == 0);
  put_zone(root, "Huge", std::string(sandpool::kMaxTzifBytes + 1, 'T'));
  put_zone(root, "Text", "Europe/Berlin\n");
  const std::string berlin = sandpool::testing::read_file_bytes(
      std::string(sandpool::kDefaultZoneRoot) + "/Europe/Berlin");
  put_zone(root, "Cut", berlin.substr(0, berlin.size() / 2));
  const sandpool::ZoneDatabase zones(root.path());
  const auto [name, what] = GENERATE(table<std::string, std::string>({
      {"Dir", "not a regular file"},
      {"Fifo", "not a regular file"},
      {"Huge", "over 65536 bytes"},
      {"Text", "no TZif magic"},
      {"Cut", "TZif: "},
  }));
  const auto zone = zones.zone(name);
  REQUIRE_FALSE(zone.is_ok());
  CHECK_THAT(zone.status().message(), Catch::StartsWith("time zone \"" + name + "\": ") &&
                                          Catch::Contains(root.path() + "/" + name + ": ") &&
                                          Catch::Contains(what));
}

TEST_CASE("threads resolving the same zones get the same zones") {
  const PublicDir root;
  TzifParts parts;
  parts.type_offsets = {3600};
  parts.footer = "XYZ-1";
  for (const char* name : {"A", "B/C", "D"}) put_zone(root, name, build_tzif(parts));
  const sandpool::ZoneDatabase zones(root.path());
  std::vector<std::vector<const TimeZone*>> seen(4);
  std::vector<std::thread> threads;
  for (auto& mine : seen) {
    threads.emplace_back([&zones, &mine] {
      for (int i = 0; i < 50; ++i) {
        for (const char* name : {"A", "B/C", "D"}) {
          auto z = zones.zone(name);
          mine.push_back(z.is_ok() ? *z : nullptr);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& mine : seen) {
    REQUIRE(mine.size() == 150);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      CHECK(mine[i] != nullptr);
      CHECK(mine[i] == seen[0][i]);
    }
  }
}

}  // namespace sandpool::named_zone_test
