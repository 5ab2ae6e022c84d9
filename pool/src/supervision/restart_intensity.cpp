#include "supervision/restart_intensity.hpp"

#include <algorithm>

namespace sandpool::supervision {
namespace {
constexpr std::int64_t kMsNs = 1000000;
}  // namespace

bool RestartIntensity::note_restart(std::int64_t now) {
  times_.push_back(now);
  const std::int64_t horizon = now - limits_.window.count() * kMsNs;
  while (!times_.empty() && times_.front() < horizon) times_.pop_front();
  bool entered = false;
  if (crash_loop_) {
    ++backoffs_;
  } else if (times_.size() > limits_.max_restarts) {
    crash_loop_ = true;
    backoffs_ = 1;
    entered = true;
  }
  if (crash_loop_) {
    // base * 2^(n-1), capped; the shift is bounded so it cannot overflow.
    const std::int64_t backoff_ms = std::min<std::int64_t>(
        limits_.backoff_max.count(), limits_.backoff_base.count()
                                         << std::min<std::uint32_t>(backoffs_ - 1, 20));
    not_before_ns_ = std::max(not_before_ns_, now + backoff_ms * kMsNs);
  }
  return entered;
}

bool RestartIntensity::note_stable(std::int64_t ready_ns, std::int64_t now) {
  if (!crash_loop_ || now - ready_ns < limits_.stable_after.count() * kMsNs) return false;
  crash_loop_ = false;
  backoffs_ = 0;
  not_before_ns_ = 0;
  times_.clear();
  return true;
}

}  // namespace sandpool::supervision
