// The POSIX TZ rule of a TZif footer: its parser (every byte checked, every number bounded
// before it is used) and the offset it gives at an instant.
#include <sandpool/schedule/posix_tz.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include <sandpool/schedule/time_zone.hpp>

namespace sandpool {

namespace {

constexpr std::int64_t kSecondsPerDay = 86400;

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

// Reads the TZ string left to right; the first error stops it and is kept with its byte.
class TzReader {
 public:
  explicit TzReader(std::string_view text) : s_(text) {}

  bool done() const { return pos_ == s_.size(); }
  char peek() const { return done() ? '\0' : s_[pos_]; }
  bool failed() const { return !error_.empty(); }
  bool eat(char c) {
    if (peek() != c || done()) return false;
    ++pos_;
    return true;
  }
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at byte " + std::to_string(pos_);
    return false;
  }
  const std::string& error() const { return error_; }

  // A zone abbreviation: 3+ letters, or <3+ of letters, digits, '+', '-'>. Only checked;
  // an error names the byte the name began at.
  bool name() {
    const std::size_t start = pos_;
    if (eat('<')) {
      while (!done() &&
             (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '+' || peek() == '-')) {
        ++pos_;
      }
      const std::size_t length = pos_ - start - 1;
      const bool closed = eat('>');
      if (length < 3 || !closed) {
        pos_ = start;
        return fail(closed ? "a quoted zone name needs 3 or more characters"
                           : "a quoted zone name ends with '>'");
      }
      return true;
    }
    while (!done() && std::isalpha(static_cast<unsigned char>(peek()))) ++pos_;
    if (pos_ - start < 3) {
      pos_ = start;
      return fail("a zone name needs 3 or more letters");
    }
    return true;
  }

  // [+-]hh[:mm[:ss]] with hh up to max_hours; returns seconds (signed as written).
  bool clock(int max_hours, std::int64_t* out) {
    int sign = 1;
    if (eat('-')) {
      sign = -1;
    } else {
      eat('+');
    }
    std::int64_t hours = 0;
    if (!number(max_hours >= 100 ? 3 : 2, max_hours, &hours)) return fail("expected hours");
    std::int64_t minutes = 0;
    std::int64_t seconds = 0;
    if (eat(':')) {
      if (!number(2, 59, &minutes)) return fail("expected minutes 00-59");
      if (eat(':') && !number(2, 59, &seconds)) return fail("expected seconds 00-59");
    }
    *out = sign * (hours * 3600 + minutes * 60 + seconds);
    return true;
  }

  // 1 to max_digits decimal digits, at most max_value. On failure the reader stays where the number
  // began, which the error names.
  bool number(int max_digits, std::int64_t max_value, std::int64_t* out) {
    const std::size_t start = pos_;
    std::int64_t v = 0;
    int digits = 0;
    while (digits < max_digits && std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + (peek() - '0');
      ++pos_;
      ++digits;
    }
    if (digits == 0 || v > max_value) {
      pos_ = start;
      return false;
    }
    *out = v;
    return true;
  }

  // Jn | n | Mm.w.d, then an optional /time.
  bool date(PosixTzDate* d) {
    std::int64_t v = 0;
    if (eat('J')) {
      if (!number(3, 365, &v) || v < 1) return fail("expected a day 1-365 after J");
      d->kind = PosixTzDate::Kind::kJulianNoLeap;
      d->day = static_cast<int>(v);
    } else if (eat('M')) {
      std::int64_t m = 0;
      std::int64_t w = 0;
      if (!number(2, 12, &m) || m < 1) return fail("expected a month 1-12 after M");
      if (!eat('.') || !number(1, 5, &w) || w < 1) return fail("expected .week 1-5");
      if (!eat('.') || !number(1, 6, &v)) return fail("expected .day of week 0-6");
      d->kind = PosixTzDate::Kind::kMonthWeekDay;
      d->month = static_cast<int>(m);
      d->week = static_cast<int>(w);
      d->day = static_cast<int>(v);
    } else {
      if (!number(3, 365, &v)) return fail("expected a rule date (Jn, n or Mm.w.d)");
      d->kind = PosixTzDate::Kind::kZeroBasedDay;
      d->day = static_cast<int>(v);
    }
    d->time = 7200;
    if (eat('/') && !clock(167, &d->time)) return false;
    return true;
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

// Returns the Unix seconds of the local time `d` of `year` read at offset `offset`.
std::int64_t instant_of(const PosixTzDate& d, int year, std::int64_t offset) {
  std::int64_t day = 0;  // days after January 1
  switch (d.kind) {
    case PosixTzDate::Kind::kJulianNoLeap:
      day = d.day - 1 + (is_leap(year) && d.day >= 60 ? 1 : 0);
      break;
    case PosixTzDate::Kind::kZeroBasedDay:
      day = d.day;
      break;
    case PosixTzDate::Kind::kMonthWeekDay: {
      const int first = 1 + (d.day - day_of_week(year, d.month, 1) + 7) % 7;
      int mday = first + 7 * (d.week - 1);
      while (mday > days_in_month(year, d.month)) mday -= 7;  // week 5: the last one
      day = days_from_civil(year, d.month, mday) - days_from_civil(year, 1, 1);
      break;
    }
  }
  return (days_from_civil(year, 1, 1) + day) * kSecondsPerDay + d.time - offset;
}

}  // namespace

Result<PosixTz> parse_posix_tz(std::string_view text) {
  if (text.size() > kMaxPosixTzLength) {
    return Status::invalid("TZ rule over " + std::to_string(kMaxPosixTzLength) + " bytes");
  }
  PosixTz tz;
  TzReader r(text);
  std::int64_t west = 0;
  if (r.name() && r.clock(24, &west)) {
    tz.std_offset = -west;
    if (!r.done() && r.name()) {
      tz.has_dst = true;
      tz.dst_offset = tz.std_offset + 3600;
      if (!r.done() && r.peek() != ',' && r.clock(24, &west)) tz.dst_offset = -west;
      if (!r.failed() && !r.eat(',')) r.fail("a DST zone needs its rule (,start,end)");
      if (!r.failed() && r.date(&tz.dst_start)) {
        if (!r.eat(',')) {
          r.fail("expected ',' and the end of DST");
        } else {
          r.date(&tz.dst_end);
        }
      }
    }
    if (!r.failed() && !r.done()) r.fail("unexpected text after the rule");
  }
  if (r.failed()) {
    return Status::invalid("TZ rule \"" + printable(text) + "\": " + r.error());
  }
  return tz;
}

std::int64_t PosixTz::utc_offset(std::int64_t t) const {
  if (!has_dst) return std_offset;
  // Years far outside the calendar's range read as their nearest year within it.
  const std::int64_t lo = days_from_civil(-9999, 1, 1) * kSecondsPerDay;
  const std::int64_t hi = days_from_civil(9999, 12, 31) * kSecondsPerDay;
  t = std::clamp(t, lo, hi);
  const int year = utc_civil(t + std_offset).year;
  // The changes of the year before, this one and the next, in order; the last one at or
  // before t decides. An end and a start at the same instant (DST all year, as the version
  // 3 extension spells it) leave DST on.
  struct Change {
    std::int64_t at;
    bool to_dst;
  };
  std::array<Change, 6> changes{};
  std::size_t n = 0;
  for (int y = year - 1; y <= year + 1; ++y) {
    changes[n++] = {instant_of(dst_end, y, dst_offset), false};
    changes[n++] = {instant_of(dst_start, y, std_offset), true};
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.at < b.at; });
  bool dst = false;
  for (const Change& c : changes) {
    if (c.at > t) break;
    dst = c.to_dst;
  }
  return dst ? dst_offset : std_offset;
}

}  // namespace sandpool
