// What a pool measures about itself for monitoring: counters by outcome and reason, workers
// by state, and latency histograms (docs/metrics.md names the Prometheus series built from
// them).
//
// Thread-safety: plain values. The pool's loop thread records into its own copy; Pool::metrics()
// hands out a snapshot that the caller owns.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/pool/pool.hpp>
#include <sandpool/task/task.hpp>

namespace sandpool {

// Enumerators in Outcome and DeadReason (both are dense, from 0).
inline constexpr std::size_t kOutcomeCount = static_cast<std::size_t>(Outcome::kCancelled) + 1;
inline constexpr std::size_t kDeadReasonCount = static_cast<std::size_t>(DeadReason::kRejected) + 1;

// A latency histogram with fixed bucket bounds (10 us to 60 s in 1-2.5-5 steps), so that
// every pool's histograms add up and render as one Prometheus histogram. Recording is an
// increment and a binary search over 21 bounds: no allocation.
class Histogram {
 public:
  // Upper bounds (inclusive, as Prometheus' `le`), nanoseconds, ascending.
  static constexpr std::array<std::int64_t, 21> kBoundsNs = {
      10'000,         25'000,         50'000,        100'000,       250'000,       500'000,
      1'000'000,      2'500'000,      5'000'000,     10'000'000,    25'000'000,    50'000'000,
      100'000'000,    250'000'000,    500'000'000,   1'000'000'000, 2'500'000'000, 5'000'000'000,
      10'000'000'000, 30'000'000'000, 60'000'000'000};
  // One bucket per bound plus the last, above every bound (+Inf).
  static constexpr std::size_t kBuckets = kBoundsNs.size() + 1;

  // Counts one observation; a negative one (a clock that stepped back) counts as 0.
  void record(std::int64_t ns) {
    if (ns < 0) ns = 0;
    const auto it = std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), ns);
    ++buckets_[static_cast<std::size_t>(it - kBoundsNs.begin())];
    ++count_;
    sum_ns_ += ns;
  }
  std::uint64_t count() const { return count_; }
  std::int64_t sum_ns() const { return sum_ns_; }
  // Observations in bucket i alone: above bound i-1 and at most bound i (i == kBuckets - 1:
  // above the last bound).
  std::uint64_t bucket(std::size_t i) const { return buckets_[i]; }
  // Observations at most bound i (Prometheus' cumulative `_bucket{le=...}`).
  std::uint64_t cumulative(std::size_t i) const {
    std::uint64_t n = 0;
    for (std::size_t b = 0; b <= i; ++b) n += buckets_[b];
    return n;
  }

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::int64_t sum_ns_ = 0;
};

// Workers by state (the states of WorkerInfo::state).
struct WorkerStateCounts {
  std::uint32_t starting = 0, idle = 0, busy = 0, draining = 0, stopping = 0;
};

// A pool's PoolOptions::dispatch_function: its calls, how long each took, and what went
// wrong (each of the three made the built-in strategy choose, except a slow call).
struct DispatchFunctionMetrics {
  std::uint64_t calls = 0;
  std::uint64_t errors = 0;   // it threw
  std::uint64_t invalid = 0;  // it named a worker out of range, starting or full
  std::uint64_t slow = 0;     // it took longer than dispatch_function_slow
  Histogram time;             // per call
};

// One pool's snapshot for monitoring.
struct PoolMetrics {
  std::string pool;  // PoolOptions::name
  PoolStats stats;   // counters, gauges and the pool's state
  bool failed = false;
  // Attempts that ended, by outcome (index: Outcome). A task cancelled before it started,
  // or put back unstarted from a dead worker's ring, ended no attempt.
  std::array<std::uint64_t, kOutcomeCount> attempts{};
  // Tasks dead-lettered, by reason (index: DeadReason; kNone stays 0).
  std::array<std::uint64_t, kDeadReasonCount> dead_lettered{};
  WorkerStateCounts workers;
  std::uint64_t worker_rss_bytes = 0;         // summed over the live workers; 0 when unknown
  Histogram queue_wait;                       // submit -> first dispatch, once per dispatched task
  Histogram run_time;                         // dispatch -> end, once per attempt
  Histogram end_to_end;                       // submit -> terminal, once per task
  DispatchFunctionMetrics dispatch_function;  // all zero without one
  // Tasks waiting (queued or scheduled) per tenant, for the kMetricsTenants tenants with the
  // most, most first. Named tenants; "" (the default tenant) only in a pool with
  // queue.max_per_tenant, the only one that counts it.
  std::vector<std::pair<std::string, std::uint64_t>> tenants_waiting;
};

// The bound on PoolMetrics::tenants_waiting (and so on /metrics' per-tenant series).
inline constexpr std::size_t kMetricsTenants = 100;

}  // namespace sandpool
