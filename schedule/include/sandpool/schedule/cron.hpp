// A schedule's timing: a 5-field cron expression (minute hour day-of-month month day-of-week,
// with lists, ranges, steps, `*`, month and day names), a macro (@hourly @daily @weekly
// @monthly @yearly, and their aliases @midnight @annually), or `@every <duration>` (an
// interval of 1 s .. 366 d, slots at anchor + k * interval). docs/schedules.md is the contract.
//
// Thread-safety: a parsed CronExpr is an immutable value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/schedule/time_zone.hpp>

namespace sandpool {

class CronExpr {
 public:
  // Bounds of an @every interval, in seconds.
  static constexpr std::int64_t kMinInterval = 1;
  static constexpr std::int64_t kMaxInterval = 366 * 86400;
  // Longest expression accepted (the text is bounded before it is parsed).
  static constexpr std::size_t kMaxText = 256;

  // Returns the expression `text` parsed, or an invalid-argument error naming the field and
  // the 1-based character position in `text` ("minute field, position 3: ..."). An
  // expression whose days can never occur ("0 0 31 2 *") is refused too.
  static Result<CronExpr> parse(std::string_view text);

  // Returns the first slot strictly after Unix seconds `after`, as the Unix seconds it fires
  // at: for a cron expression, the next matching minute of `zone` (DST resolved as
  // TimeZone::fire_instant says; several slots that fall into one gap fire once); for an
  // interval, the next anchor + k * interval (zone unused). nullopt when `after` (or the
  // interval's `anchor`) is negative or past kLatestAfter, or when no slot exists within the
  // search's bound (never for an accepted expression, but the search is bounded anyway). A
  // slot found may lie past kLatestAfter; asking for the one after it then answers nullopt.
  static constexpr std::int64_t kLatestAfter = 221845392000;  // 9000-01-01T00:00:00Z
  std::optional<std::int64_t> next_after(std::int64_t after, const TimeZone& zone,
                                         std::int64_t anchor = 0) const;

  // The text as given (trimmed).
  const std::string& text() const { return text_; }
  // Returns the interval in seconds for @every, 0 for a cron expression.
  std::int64_t interval() const { return interval_; }
  // Returns true iff civil time `c` (seconds ignored) is one of the expression's minutes.
  bool matches(const CivilTime& c) const;

 private:
  CronExpr() = default;
  bool day_matches(int year, int month, int day) const;
  // The first matching civil minute at or after `from` (seconds ignored), bounded.
  std::optional<CivilTime> next_match(CivilTime from) const;

  std::string text_;
  std::int64_t interval_ = 0;  // @every: seconds; 0: the fields below are the expression
  std::uint64_t minutes_ = 0;  // bit m: minute m
  std::uint32_t hours_ = 0;    // bit h
  std::uint32_t days_ = 0;     // bit d, 1-31
  std::uint16_t months_ = 0;   // bit m, 1-12
  std::uint8_t weekdays_ = 0;  // bit w, 0 = Sunday (7 folds to 0)
  bool day_star_ = false;      // the day-of-month field starts with `*` (Vixie's rule)
  bool weekday_star_ = false;  // the day-of-week field starts with `*`
};

// Parses a duration such as "30s", "5m", "1h30m", "2d" (units d h m s, each at most once, in
// that order); returns seconds, or an error naming the 1-based position within `text`.
Result<std::int64_t> parse_every_duration(std::string_view text);

}  // namespace sandpool
