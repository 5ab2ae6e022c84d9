// The schedules' clock in poold: the wall clock, plus, for tests only, an offset in seconds
// read from the file that SANDPOOL_TEST_CLOCK_OFFSET_FILE names (docs/development.md,
// "Moving poold's schedule clock"). A test moves poold's schedules a minute ahead without
// waiting a minute. The offset moves nothing else (task times, journal, metrics).
//
// Thread-safety: now_ms() may be called from any thread (the file is re-read each call; the
// scheduler calls it about once a second).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sandpool/schedule/scheduler.hpp>

namespace sandpool::poold {

// The environment variable naming the offset file; unset in production.
inline constexpr const char* kTestClockOffsetEnv = "SANDPOOL_TEST_CLOCK_OFFSET_FILE";

class ScheduleWallClock final : public ScheduleClock {
 public:
  // `offset_file`: empty for the plain wall clock.
  explicit ScheduleWallClock(std::string offset_file) : offset_file_(std::move(offset_file)) {}
  std::int64_t now_ms() const override;
  const std::string& offset_file() const { return offset_file_; }

 private:
  std::string offset_file_;
};

// Returns the offset in seconds that `text` (the offset file's content) holds: an optional
// sign and at most 10 digits, surrounding whitespace allowed, at most 10 years either way;
// nullopt for anything else (then no offset applies).
std::optional<std::int64_t> parse_clock_offset(const std::string& text);

}  // namespace sandpool::poold
