// TokenBucket: admits up to `burst` events at once and `per_second` on average; what the
// worker host's API uses to bound a plugin's log and progress traffic, and the manager to
// bound what one worker may put into its log. Not thread-safe (its owner serialises calls).
#pragma once

#include <algorithm>
#include <cstdint>

namespace sandpool {

class TokenBucket {
 public:
  TokenBucket(double per_second, double burst) : rate_(per_second), burst_(burst), tokens_(burst) {}

  // Returns true iff an event at monotonic time `now_ns` is admitted (and takes its token).
  bool take(std::int64_t now_ns) {
    if (now_ns > last_ns_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_ns_) * rate_ / 1e9);
      last_ns_ = now_ns;
    }
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }
  double per_second() const { return rate_; }

 private:
  double rate_;
  double burst_;
  double tokens_;
  std::int64_t last_ns_ = 0;
};

}  // namespace sandpool
