#include <algorithm>
#include <cmath>
#include <string>

#include <sandpool/pool/pool_options.hpp>

namespace sandpool {

std::chrono::milliseconds RetryPolicy::ceiling_for(std::uint32_t attempt) const {
  if (attempt == 0) attempt = 1;
  const double base_ms = static_cast<double>(base.count());
  const double max_ms = static_cast<double>(max.count());
  // Capped before it can overflow: multiplier^(attempt-1) grows fast.
  const double raw = base_ms * std::pow(std::max(multiplier, 1.0), attempt - 1.0);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::min(raw, max_ms)));
}

std::string_view to_string(DispatchStrategy s) {
  switch (s) {
    case DispatchStrategy::kRoundRobin:
      return "round-robin";
    case DispatchStrategy::kLeastLoaded:
      return "least-loaded";
    case DispatchStrategy::kRandom:
      return "random";
    case DispatchStrategy::kAffinity:
      return "affinity";
    case DispatchStrategy::kLeastRss:
      return "least-rss";
    case DispatchStrategy::kByKey:
      return "by-key";
  }
  return "unknown";
}

std::optional<DispatchStrategy> parse_strategy(std::string_view name) {
  std::string dashed(name);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (DispatchStrategy s : kDispatchStrategies) {
    if (to_string(s) == dashed) return s;
  }
  return std::nullopt;
}

}  // namespace sandpool
