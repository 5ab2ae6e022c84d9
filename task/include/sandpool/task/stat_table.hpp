// StatDef: one row of a table that defines a stats struct's figures once (its member, its name
// in the control protocol's replies, its Prometheus metric and help, the metric's type and
// unit), so that the layer that counts, the JSON the replies carry
// (<sandpool/control/op_json.hpp>) and the Prometheus text (<sandpool/metrics/metrics.hpp>)
// all read the same row instead of restating the names. The tables: store_stats.hpp (the
// dead-letter store, the task journal), pool_counts.hpp (a pool's counters), redis_counts.hpp
// (a Redis pool's node figures).
#pragma once

#include <cstdint>
#include <string_view>

namespace sandpool {

enum class MetricType { kCounter, kGauge };

// How a figure becomes its metric's value: as it is, or a figure in microseconds as seconds
// (Prometheus durations are seconds).
enum class MetricScale { kAsIs, kMicrosToSeconds };

// One figure of `Stats`: a count (`member`) or, where `member` is null, a flag (`flag`, a JSON
// bool, the metric 0 or 1); its name in the replies (empty: not in them), its metric (empty:
// not exported) and what it counts.
template <class Stats>
struct StatDef {
  std::uint64_t Stats::*member;
  std::string_view status_name;
  std::string_view metric;
  std::string_view help;
  MetricType type = MetricType::kCounter;
  MetricScale scale = MetricScale::kAsIs;
  bool Stats::*flag = nullptr;
};

}  // namespace sandpool
