// A POSIX TZ rule, as the footer of a TZif file gives it (RFC 8536 section 3.3) for the
// instants after the file's last transition: `CET-1CEST,M3.5.0,M10.5.0/3`,
// `<+1030>-10:30<+11>-11,M10.1.0,M4.1.0`, `IST-5:30`. Names are alphabetic (3+ letters) or
// quoted in `<>` (3+ of letters, digits, `+`, `-`); offsets are `[+-]hh[:mm[:ss]]` west of
// UTC (hh 0-24); rule dates are `Jn` (1-365, February 29 never counted), `n` (0-365) or
// `Mm.w.d`; rule times `/[+-]hh[:mm[:ss]]` with hh up to 167 (RFC 8536's version 3
// extension). A DST name without a rule is refused: POSIX leaves its rule to the
// implementation, and a TZif footer always gives one.
//
// Why our own parser: Boost.DateTime's posix_time_zone (libboost-dev 1.74) throws on quoted
// names and on rule times past 24:00, both in Debian's tzdata (docs/schedules.md).
//
// Thread-safety: a parsed rule is an immutable value.
#pragma once

#include <cstdint>
#include <string_view>

#include <sandpool/base/status.hpp>

namespace sandpool {

// One end of daylight saving time in a year: a day and a local time of that day.
struct PosixTzDate {
  enum class Kind { kJulianNoLeap, kZeroBasedDay, kMonthWeekDay };
  Kind kind = Kind::kMonthWeekDay;
  int day = 0;               // Jn: 1-365; n: 0-365; M: day of week 0-6 (Sunday 0)
  int month = 0;             // M only: 1-12
  int week = 0;              // M only: 1-5 (5: the last such day of the month)
  std::int64_t time = 7200;  // seconds after local midnight, -167h .. 167h
};

struct PosixTz {
  std::int64_t std_offset = 0;  // seconds east of UTC (the TZ string's sign inverted)
  bool has_dst = false;
  std::int64_t dst_offset = 0;
  PosixTzDate dst_start;  // read in standard time
  PosixTzDate dst_end;    // read in daylight time

  // Returns the offset (seconds east of UTC) in force at Unix seconds `t` under the rule.
  std::int64_t utc_offset(std::int64_t t) const;
};

// The longest TZ string accepted (tzdata's longest footer is under 60 bytes).
inline constexpr std::size_t kMaxPosixTzLength = 256;

// Returns the rule `text` spells, or an invalid-argument error naming what is wrong and at
// which byte.
Result<PosixTz> parse_posix_tz(std::string_view text);

}  // namespace sandpool
