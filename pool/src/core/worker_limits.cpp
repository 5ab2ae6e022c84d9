// The limits a pool's workers get that are derived from its options, not configured as they
// are (<sandpool/pool/pool_options.hpp>).
#include <sandpool/pool/pool_options.hpp>

#include <algorithm>
#include <cstdint>

namespace sandpool {

std::uint64_t worker_cpu_seconds(const PoolOptions& opts) {
  if (opts.sandbox.limits.cpu_seconds != 0) return opts.sandbox.limits.cpu_seconds;
  // The most CPU one attempt is meant to use: its CPU budget, or as much as its wall-clock
  // timeout lets one thread use, in whole seconds rounded up.
  const std::int64_t budget_ms =
      std::max<std::int64_t>({opts.cpu_time.count(), opts.timeout.count(), std::int64_t{0}});
  // At most 9.3e15 s (int64 milliseconds): times 10 it still fits a uint64.
  const auto budget_s =
      static_cast<std::uint64_t>(budget_ms / 1000 + (budget_ms % 1000 != 0 ? 1 : 0));
  return std::max(budget_s * kWorkerCpuFactor, kWorkerCpuFloorSeconds);
}

}  // namespace sandpool
