#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>

namespace sandpool::bench {

void Report::add(std::string group, std::string metric, double value, std::string unit) {
  figures_.push_back({std::move(group), std::move(metric), value, std::move(unit)});
  if (json_) return;
  const Figure& f = figures_.back();
  std::cout << f.group << ' ' << f.metric << ' ' << format_value(f.value) << ' ' << f.unit
            << std::endl;
}

std::optional<double> Report::find(const std::string& group, const std::string& metric) const {
  for (auto it = figures_.rbegin(); it != figures_.rend(); ++it) {
    if (it->group == group && it->metric == metric) return it->value;
  }
  return std::nullopt;
}

void Report::note(const std::string& text) {
  notes_.push_back(text);
  std::cerr << "# " << text << std::endl;
}

void Report::finish(std::ostream& out) const {
  if (!json_) return;
  nlohmann::json doc;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  doc["host"] = host;
  doc["cpus"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  doc["time"] = static_cast<std::int64_t>(std::time(nullptr));
  doc["figures"] = nlohmann::json::array();
  for (const Figure& f : figures_) {
    doc["figures"].push_back(
        {{"group", f.group}, {"metric", f.metric}, {"value", f.value}, {"unit", f.unit}});
  }
  doc["notes"] = notes_;
  out << doc.dump(2) << std::endl;
}

std::string format_value(double v) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  // From 99.95 up "%.3g" has no digit after the point left to show, and from 999.5 it
  // writes an exponent ("1e+03"): whole numbers read better and parse the same.
  if (std::fabs(v) >= 99.95 || (v == std::floor(v) && std::fabs(v) < 1e15)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

Summary summarize(std::vector<double>& samples) {
  Summary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  // Nearest-rank percentiles: the smallest sample with at least p% of samples at or below.
  auto rank = [&](double p) {
    const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(s.count)));
    return samples[std::min(s.count, std::max<std::size_t>(k, 1)) - 1];
  };
  s.p50 = rank(50);
  s.p99 = rank(99);
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  return s;
}

}  // namespace sandpool::bench
