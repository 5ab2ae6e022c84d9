// A schedule's time zone, as a small seam: a zone says only what its UTC offset is at an
// instant (utc_offset). Everything a schedule needs from it, civil time at an instant and the
// instant a civil time fires at (DST gaps and repeats resolved), is computed from that one
// function, so a named-zone implementation (a tz database) slots in by implementing it.
//
// Two zones exist today: `UTC` and `local` (the poold process's own zone: TZ / /etc/localtime,
// read with localtime_r, which is thread-safe for the process zone). docs/schedules.md.
//
// Thread-safety: zones are immutable; every function may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <sandpool/status.hpp>

namespace sandpool {

// A wall-clock reading in some zone; month 1-12, day 1-31, hour 0-23, minute 0-59,
// second 0-59. Compared field by field (year first).
struct CivilTime {
  int year = 1970;
  int month = 1;
  int day = 1;
  int hour = 0;
  int minute = 0;
  int second = 0;
  auto operator<=>(const CivilTime&) const = default;
};

// Returns the days from 1970-01-01 to the civil date (negative before it).
std::int64_t days_from_civil(int year, int month, int day);
// Returns the number of days of `month` (1-12) in `year`.
int days_in_month(int year, int month);
// Returns the day of week of the civil date, 0 = Sunday .. 6 = Saturday.
int day_of_week(int year, int month, int day);
// Returns `c` read as a UTC time, in Unix seconds (no zone involved).
std::int64_t civil_as_utc(const CivilTime& c);
// Returns the UTC civil time of Unix seconds `t`.
CivilTime utc_civil(std::int64_t t);

class TimeZone {
 public:
  virtual ~TimeZone() = default;
  // "UTC" or "local": what the schedule's `zone` says.
  virtual std::string_view name() const = 0;
  // Returns the zone's offset from UTC, in seconds (east positive), at Unix seconds `t`.
  virtual std::int64_t utc_offset(std::int64_t t) const = 0;

  // Returns the zone's civil time at Unix seconds `t`.
  CivilTime civil(std::int64_t t) const;
  // Returns the instant a slot at civil time `c` fires at: the earliest instant whose civil
  // time is `c` (a civil time of the repeated autumn hour fires at its first occurrence);
  // for a civil time skipped by a spring-forward gap, the first instant after the gap
  // (cronie's rule). Assumes at most one offset change within a day of `c`, true of every
  // zone in the tz database.
  std::int64_t fire_instant(const CivilTime& c) const;
};

// The two zones; each lives for the whole program.
const TimeZone& utc_zone();
const TimeZone& local_zone();
// Returns the zone named `name` ("UTC", "local"), or an invalid-argument error naming it.
Result<const TimeZone*> zone_named(std::string_view name);

}  // namespace sandpool
