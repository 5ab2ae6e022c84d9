// The zone seam's shared arithmetic (civil time from an offset, DST resolution) and its two
// built-in zones (the named ones: zone_database.cpp). Calendar arithmetic is std::chrono's
// (proleptic Gregorian), never the C library's.
#include <sandpool/schedule/time_zone.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace sandpool {

namespace {

constexpr std::int64_t kDay = 86400;

class UtcZone final : public TimeZone {
 public:
  std::string_view name() const override { return "UTC"; }
  std::int64_t utc_offset(std::int64_t) const override { return 0; }
};

// The process zone. localtime_r reads TZ (or /etc/localtime) once through glibc's tzset, under
// glibc's own lock: safe from any thread as long as nobody changes TZ while threads run.
class LocalZone final : public TimeZone {
 public:
  std::string_view name() const override { return "local"; }
  std::int64_t utc_offset(std::int64_t t) const override {
    const time_t tt = static_cast<time_t>(t);
    struct tm tm {};
    if (localtime_r(&tt, &tm) == nullptr) return 0;  // out of time_t's range: read as UTC
    return tm.tm_gmtoff;
  }
};

}  // namespace

std::int64_t days_from_civil(int year, int month, int day) {
  using namespace std::chrono;
  const sys_days d{std::chrono::year{year} / static_cast<unsigned>(month) /
                   static_cast<unsigned>(day)};
  return d.time_since_epoch().count();
}

int days_in_month(int year, int month) {
  using namespace std::chrono;
  const year_month_day_last end{std::chrono::year{year},
                                month_day_last{std::chrono::month{static_cast<unsigned>(month)}}};
  return static_cast<int>(static_cast<unsigned>(end.day()));
}

int day_of_week(int year, int month, int day) {
  const std::int64_t days = days_from_civil(year, month, day);
  // 1970-01-01 was a Thursday (4).
  return static_cast<int>(((days % 7) + 7 + 4) % 7);
}

std::int64_t civil_as_utc(const CivilTime& c) {
  return days_from_civil(c.year, c.month, c.day) * kDay + c.hour * 3600 + c.minute * 60 + c.second;
}

CivilTime utc_civil(std::int64_t t) {
  using namespace std::chrono;
  std::int64_t days = t / kDay;
  std::int64_t secs = t % kDay;
  if (secs < 0) {
    secs += kDay;
    --days;
  }
  const year_month_day ymd{sys_days{std::chrono::days{days}}};
  CivilTime c;
  c.year = static_cast<int>(ymd.year());
  c.month = static_cast<int>(static_cast<unsigned>(ymd.month()));
  c.day = static_cast<int>(static_cast<unsigned>(ymd.day()));
  c.hour = static_cast<int>(secs / 3600);
  c.minute = static_cast<int>(secs % 3600 / 60);
  c.second = static_cast<int>(secs % 60);
  return c;
}

CivilTime TimeZone::civil(std::int64_t t) const { return utc_civil(t + utc_offset(t)); }

std::int64_t TimeZone::fire_instant(const CivilTime& c) const {
  const std::int64_t g = civil_as_utc(c);
  // The instant is g - offset(instant); the offsets in force within a day of g are the
  // candidates (at most two: one change a day at most).
  const std::int64_t before = utc_offset(g - kDay);
  const std::int64_t after = utc_offset(g + kDay);
  const std::set<std::int64_t> offsets{before, utc_offset(g), after};
  bool found = false;
  std::int64_t earliest = 0;
  for (const std::int64_t off : offsets) {
    const std::int64_t t = g - off;
    if (utc_offset(t) != off) continue;  // c does not read as this offset's time
    if (!found || t < earliest) earliest = t;
    found = true;
  }
  if (found) return earliest;
  // A gap (the clock jumped over c): the first instant whose civil time is past c. Before
  // the change the civil time is below c, after it above, so the search is monotone.
  std::int64_t lo = g - std::max(before, after);
  std::int64_t hi = g - std::min(before, after);
  if (civil(lo) > c) return lo;
  while (hi - lo > 1) {  // civil(lo) <= c < civil(hi)
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (civil(mid) > c) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

const TimeZone& utc_zone() {
  static const UtcZone zone;
  return zone;
}

const TimeZone& local_zone() {
  static const LocalZone zone;
  return zone;
}

}  // namespace sandpool
