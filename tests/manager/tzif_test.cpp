// The TZif reader and the POSIX TZ rule of its footer, each compared with glibc (localtime_r
// in a child process with TZ set) and fed truncated, lying and malformed files.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/schedule/posix_tz.hpp>
#include <sandpool/schedule/time_zone.hpp>
#include <sandpool/schedule/tzif.hpp>

#include "zone_test_support.hpp"

// A namespace of its own: the unity build joins this file with the other zone tests.
namespace sandpool::tzif_test {
namespace {

using sandpool::testing::build_tzif;
using sandpool::testing::glibc_offsets;
using sandpool::testing::TzifParts;

std::int64_t utc(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) {
  return sandpool::civil_as_utc(sandpool::CivilTime{y, mo, d, h, mi, s});
}

// Every half hour of [from, to) and the second before each: a change on a half hour is
// seen on both of its sides.
std::vector<std::int64_t> half_hours(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t t = from; t < to; t += 1800) {
    out.push_back(t - 1);
    out.push_back(t);
  }
  return out;
}

void check_rule_against_glibc(const std::string& text, const std::vector<std::int64_t>& at) {
  auto rule = sandpool::parse_posix_tz(text);
  REQUIRE(rule.is_ok());
  sandpool::testing::check_offsets(text, *rule, at, glibc_offsets(text, at).data());
}

// The second header of a build_tzif() file (after the 44-byte first header and its version
// 1 block of one type and four designation bytes).
constexpr std::size_t kSecondHeader = 44 + 6 + 4;

void put_count(std::string& file, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) file[at + i] = static_cast<char>(v >> (8 * (3 - i)) & 0xff);
}

}  // namespace

TEST_CASE("a POSIX TZ rule gives glibc's offset at every half hour of four years") {
  const std::string text = GENERATE(as<std::string>{},
                                    "CET-1CEST,M3.5.0,M10.5.0/3",            // Europe/Berlin
                                    "EST5EDT,M3.2.0,M11.1.0",                // America/New_York
                                    "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0",  // Australia/Lord_Howe
                                    "IST-5:30",                              // Asia/Kolkata
                                    "<+0330>-3:30",                          // Asia/Tehran
                                    "<-02>2<-01>,M3.5.0/-1,M10.5.0/0",       // America/Nuuk
                                    "<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45",  // Chatham
                                    "XXX3YYY,J60/1:30,J300/23",   // Jn: February 29 not counted
                                    "XXX3YYY2,59/0,300/24",       // n: counted from 0
                                    "EST5EDT,M3.2.0/25,M11.1.0",  // a v3 time past 24:00
                                    "AAA-3BBB-4:30:15,M2.5.6/167,M11.5.1/-167");
  check_rule_against_glibc(text, half_hours(utc(2026, 1, 1), utc(2030, 1, 1)));
}

TEST_CASE("a rule for daylight time all year keeps it across the new year") {
  // RFC 8536 section 3.3.1: DST from January 1 00:00 to December 31 24:00 plus the DST
  // shift is DST all year. (glibc 2.36 reads standard time in the first hours of each UTC
  // year for this rule, so it is no oracle here.)
  auto rule = sandpool::parse_posix_tz("EST5EDT4,0/0,J365/25");
  REQUIRE(rule.is_ok());
  for (const std::int64_t t : {utc(2026, 1, 1), utc(2026, 1, 1, 4, 59, 59), utc(2026, 7, 1),
                               utc(2026, 12, 31, 23, 59, 59), utc(2028, 2, 29, 12)}) {
    CAPTURE(t);
    CHECK(rule->utc_offset(t) == -4 * 3600);
  }
}

TEST_CASE("a malformed POSIX TZ rule is refused with the byte it breaks at") {
  const auto [text, what] = GENERATE(table<std::string, std::string>({
      {"", "a zone name needs 3 or more letters at byte 0"},
      {"CE-1", "a zone name needs 3 or more letters at byte 0"},
      {"CET", "expected hours at byte 3"},
      {"CET-25", "expected hours at byte 4"},
      {"CET-1:60", "expected minutes 00-59 at byte 6"},
      {"CET-1CEST", "a DST zone needs its rule (,start,end) at byte 9"},
      {"CET-1CEST,M3.5.0", "expected ',' and the end of DST at byte 16"},
      {"CET-1CEST,M13.5.0,M10.5.0", "expected a month 1-12 after M at byte 11"},
      {"CET-1CEST,M3.6.0,M10.5.0", "expected .week 1-5 at byte 13"},
      {"CET-1CEST,M3.5.7,M10.5.0", "expected .day of week 0-6 at byte 15"},
      {"CET-1CEST,J0,J365", "expected a day 1-365 after J at byte 12"},
      {"CET-1CEST,366,1", "expected a rule date (Jn, n or Mm.w.d) at byte 10"},
      {"CET-1CEST,M3.5.0/168,M10.5.0", "expected hours at byte 17"},
      {"<+03", "a quoted zone name ends with '>' at byte 0"},
      {"<+3>-3", "a quoted zone name needs 3 or more characters at byte 0"},
      {"CET-1 ", "a zone name needs 3 or more letters at byte 5"},
      {"CET-1CEST,M3.5.0,M10.5.0/3\n", "unexpected text after the rule at byte 26"},
  }));
  CAPTURE(text);
  const auto parsed = sandpool::parse_posix_tz(text);
  REQUIRE_FALSE(parsed.is_ok());
  CHECK_THAT(parsed.status().message(), Catch::Contains(what));
  CHECK(sandpool::parse_posix_tz(std::string(300, 'A')).status().message() ==
        "TZ rule over 256 bytes");
}

TEST_CASE("a slim file's footer rule gives the offsets after its last transition") {
  const sandpool::testing::PublicDir root;
  // Lord Howe's 30-minute DST from the rule alone, after two made-up early transitions.
  TzifParts parts;
  parts.transitions = {utc(1981, 1, 1), utc(1985, 1, 1)};
  parts.transition_types = {1, 0};
  parts.type_offsets = {37800, 36000};
  parts.footer = "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0";
  const std::string bytes = build_tzif(parts);
  const std::string path = sandpool::testing::put_zone(root, "Slim", bytes);
  auto tzif = sandpool::parse_tzif(bytes);
  REQUIRE(tzif.is_ok());
  CHECK(tzif->version == 2);
  REQUIRE(tzif->footer.has_value());
  std::vector<std::int64_t> at = half_hours(utc(2025, 1, 1), utc(2027, 1, 1));
  for (std::int64_t t : {utc(1970, 1, 1), utc(1981, 1, 1) - 1, utc(1981, 1, 1), utc(1984, 6, 1),
                         utc(1985, 1, 1) - 1, utc(1985, 1, 1)}) {
    at.push_back(t);
  }
  sandpool::testing::check_offsets(path, *tzif, at, glibc_offsets(":" + path, at).data());
}

TEST_CASE("a version 1 file is read from its 32-bit block") {
  const sandpool::testing::PublicDir root;
  TzifParts parts;
  parts.version = '\0';
  parts.transitions = {-2000000000, 0, 1000000000, 2000000000};
  parts.transition_types = {1, 2, 1, 0};
  parts.type_offsets = {3600, 7200, -34200};
  const std::string bytes = build_tzif(parts);
  const std::string path = sandpool::testing::put_zone(root, "Old", bytes);
  auto tzif = sandpool::parse_tzif(bytes);
  REQUIRE(tzif.is_ok());
  CHECK(tzif->version == 1);
  CHECK_FALSE(tzif->footer.has_value());
  std::vector<std::int64_t> at;
  for (std::int64_t t : parts.transitions) {
    at.insert(at.end(), {t - 1, t, t + 1});
  }
  at.push_back(2100000000);
  sandpool::testing::check_offsets(path, *tzif, at, glibc_offsets(":" + path, at).data());
}

TEST_CASE("every truncation of a real zone file is refused") {
  const std::string bytes = sandpool::testing::read_file_bytes(
      std::string(sandpool::kDefaultZoneRoot) + "/Europe/Berlin");
  REQUIRE(sandpool::parse_tzif(bytes).is_ok());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const auto cut = sandpool::parse_tzif(std::string_view(bytes).substr(0, n));
    if (cut.is_ok()) FAIL("the first " << n << " bytes parsed");
  }
}

TEST_CASE("counts that promise more than the file holds are refused before any allocation") {
  TzifParts parts;
  parts.transitions = {0, 1000};
  parts.transition_types = {1, 0};
  parts.type_offsets = {0, 3600};
  parts.footer = "XYZ0";
  const std::string good = build_tzif(parts);
  REQUIRE(sandpool::parse_tzif(good).is_ok());
  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt at 20..40 of the header.
  const auto [field, value, what] = GENERATE(table<std::size_t, std::uint32_t, std::string>({
      {32, 0xffffffffu, "counts need"},
      {32, 3, "counts need"},
      {40, 0x7fffffffu, "counts need"},
      {36, 0, "typecnt 0"},
      {36, 0xffffffffu, "typecnt 4294967295"},
      {40, 0, "charcnt 0"},
      {20, 1, "isutcnt is neither 0 nor typecnt"},
      {24, 7, "isstdcnt is neither 0 nor typecnt"},
      {28, 1, "leap-second records"},
  }));
  for (const std::size_t header : {std::size_t{0}, kSecondHeader}) {
    std::string bad = good;
    put_count(bad, header + field, value);
    CAPTURE(header, field, value);
    const auto parsed = sandpool::parse_tzif(bad);
    REQUIRE_FALSE(parsed.is_ok());
    // The first header's data counts only place the second header.
    CHECK_THAT(parsed.status().message(), Catch::Contains(what) || Catch::Contains("TZif magic") ||
                                              Catch::Contains("version 1 counts run past"));
  }
}

TEST_CASE("a lying transition, type or footer is refused") {
  TzifParts parts;
  parts.transitions = {0, 1000, 2000};
  parts.transition_types = {1, 0, 1};
  parts.type_offsets = {0, 3600};
  parts.footer = "XYZ-1";
  REQUIRE(sandpool::parse_tzif(build_tzif(parts)).is_ok());
  SECTION("a type index past the types") {
    parts.transition_types[2] = 2;
    CHECK_THAT(sandpool::parse_tzif(build_tzif(parts)).status().message(),
               Catch::Contains("transition 2 names type 2 of 2"));
  }
  SECTION("transitions that do not ascend") {
    parts.transitions[2] = 1000;
    CHECK_THAT(sandpool::parse_tzif(build_tzif(parts)).status().message(),
               Catch::Contains("transition 2 does not ascend"));
  }
  SECTION("an offset beyond 26 hours") {
    parts.type_offsets[1] = 100000;
    CHECK_THAT(sandpool::parse_tzif(build_tzif(parts)).status().message(),
               Catch::Contains("type 1 has offset 100000"));
    parts.type_offsets[1] = INT32_MIN;
    CHECK_FALSE(sandpool::parse_tzif(build_tzif(parts)).is_ok());
  }
  SECTION("a footer that is no rule") {
    for (const char* footer : {"XYZ-1XYW", "<+03", "CET-1CEST,M3.5.0", "\x01\xff\xfe"}) {
      parts.footer = footer;
      CHECK_THAT(sandpool::parse_tzif(build_tzif(parts)).status().message(),
                 Catch::Contains("footer: TZ rule"));
    }
  }
  SECTION("a footer without its newlines, or with more after it") {
    const std::string file = build_tzif(parts);
    CHECK_FALSE(sandpool::parse_tzif(file.substr(0, file.size() - 1)).is_ok());
    CHECK_FALSE(sandpool::parse_tzif(file + "extra\n").is_ok());
    CHECK_FALSE(sandpool::parse_tzif(file + "\n").is_ok());
  }
  SECTION("an unknown version, or headers that disagree") {
    std::string file = build_tzif(parts);
    file[4] = '5';
    CHECK_THAT(sandpool::parse_tzif(file).status().message(), Catch::Contains("version byte 53"));
    file = build_tzif(parts);
    file[kSecondHeader + 4] = '3';
    CHECK_THAT(sandpool::parse_tzif(file).status().message(),
               Catch::Contains("disagree on the version"));
  }
  SECTION("a file over the size cap") {
    CHECK_THAT(
        sandpool::parse_tzif(std::string(sandpool::kMaxTzifBytes + 1, 'T')).status().message(),
        Catch::Contains("over 65536 bytes"));
  }
}

}  // namespace sandpool::tzif_test
