// A schedule's time zone, as a small seam: a zone says only what its UTC offset is at an
// instant (utc_offset). Everything a schedule needs from it, civil time at an instant and the
// instant a civil time fires at (DST gaps and repeats resolved), is computed from that one
// function, so a named-zone implementation (a tz database) slots in by implementing it.
//
// `UTC`, `local` (the poold process's own zone: TZ / /etc/localtime, read with localtime_r,
// which is thread-safe for the process zone) and the tz database's named zones
// (`Europe/Berlin`), read from TZif files under a root directory (<sandpool/schedule/tzif.hpp>).
// docs/schedules.md.
//
// Thread-safety: zones are immutable; every function may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>

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
  // "UTC", "local" or the tz database name: what the schedule's `zone` says.
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

// The two built-in zones; each lives for the whole program.
const TimeZone& utc_zone();
const TimeZone& local_zone();

// The longest zone name accepted (the tz database's longest is 32 bytes).
inline constexpr std::size_t kMaxZoneName = 128;
// Where the system's tz database lives when TZDIR does not say (Debian's tzdata).
inline constexpr std::string_view kDefaultZoneRoot = "/usr/share/zoneinfo";

// The zones of one tz database tree. A name is accepted only as the tz database spells one
// (1-128 bytes of letters, digits, '/', '_', '-', '+'; no leading or doubled '/', so no `..`
// and no absolute path) and opened beneath the root (openat2 RESOLVE_BENEATH: a symlink
// may not lead out), as a regular file of at most kMaxTzifBytes. A parsed zone is cached
// for the database's lifetime (the pointers zone() returns stay valid that long); a name
// that failed is tried again next time.
//
// Thread-safety: zone() may be called from any thread; cached zones are immutable.
class ZoneDatabase {
 public:
  explicit ZoneDatabase(std::string root);
  ZoneDatabase(const ZoneDatabase&) = delete;
  ZoneDatabase& operator=(const ZoneDatabase&) = delete;
  ~ZoneDatabase();

  const std::string& root() const { return root_; }
  // Returns "UTC", "local" or the named zone; an invalid-argument error naming the zone and
  // what is wrong (a bad name, no such zone, a file that is not a valid TZif file).
  Result<const TimeZone*> zone(std::string_view name) const EXCLUDES(mu_);

 private:
  const std::string root_;
  mutable Mutex mu_;
  mutable std::map<std::string, std::unique_ptr<const TimeZone>, std::less<>> cache_
      GUARDED_BY(mu_);
};

// The process's tz database: the root is $TZDIR when it is an absolute path (as glibc reads
// it for `local`), else kDefaultZoneRoot; read once, on first use. Lives for the program.
const ZoneDatabase& system_zones();
// Returns system_zones().zone(name).
Result<const TimeZone*> zone_named(std::string_view name);

}  // namespace sandpool
