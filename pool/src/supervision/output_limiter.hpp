// OutputLimiter: the manager's bound on what one worker may put into its log, whatever the
// worker does. The worker host already rate-limits a plugin's log() calls, but a hostile
// plugin can write its stdout/stderr pipe, or forge log frames in its ring, directly; both
// kinds of lines go through this one budget (a token bucket per worker). Lines over it are
// dropped and counted; the count is reported once, in a single log line, when the next line
// is admitted or the worker goes, so the log says how much is missing.
// Not thread-safe: the pool's loop thread owns one per worker.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <sandpool/base/token_bucket.hpp>

namespace sandpool::supervision {

// Longest line the manager logs for a worker; longer ones are cut and marked.
inline constexpr std::size_t kMaxWorkerLogLine = 4096;

class OutputLimiter {
 public:
  OutputLimiter(double lines_per_second, double burst)
      : bucket_(lines_per_second, burst), rate_(lines_per_second) {}

  // Returns true iff a line at monotonic time now_ns may be logged; a refused line is
  // counted as dropped.
  bool admit(std::int64_t now_ns) {
    if (bucket_.take(now_ns)) return true;
    ++unreported_;
    ++dropped_total_;
    return false;
  }
  // Returns the lines dropped since the last call (0: nothing to report) and resets that
  // count; the caller logs the report (see report_text).
  std::uint64_t take_unreported() { return std::exchange(unreported_, 0); }
  std::uint64_t dropped_total() const { return dropped_total_; }
  // "N output line(s) dropped over the limit of R lines/s".
  std::string report_text(std::uint64_t dropped) const {
    return std::to_string(dropped) + " output line(s) dropped over the limit of " +
           std::to_string(static_cast<std::uint64_t>(rate_)) + " lines/s";
  }

 private:
  TokenBucket bucket_;
  double rate_;
  std::uint64_t unreported_ = 0;
  std::uint64_t dropped_total_ = 0;
};

// Returns text cut to kMaxWorkerLogLine bytes, ending in " [truncated]" when it was cut.
inline std::string capped_log_line(std::string_view text) {
  static constexpr std::string_view kTruncated = " [truncated]";
  if (text.size() <= kMaxWorkerLogLine) return std::string(text);
  std::string out(text.substr(0, kMaxWorkerLogLine - kTruncated.size()));
  out += kTruncated;
  return out;
}

}  // namespace sandpool::supervision
