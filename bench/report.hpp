// The figures a benchmark run produces: one per line as `GROUP METRIC VALUE UNIT`, or all
// of them as one JSON document. Also the sample statistics every latency figure uses.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace sandpool::bench {

struct Figure {
  std::string group;   // raw, W1, W2, W3, W4, spawn
  std::string metric;  // throughput, p50, ...
  double value = 0;
  std::string unit;  // tasks/s, us, ms, ratio, count, ...
};

class Report {
 public:
  // Records a figure and, unless JSON output was asked for, prints it at once (a long run
  // shows its progress).
  explicit Report(bool json) : json_(json) {}
  void add(std::string group, std::string metric, double value, std::string unit);
  // The value of an earlier figure of this run, if there was one.
  std::optional<double> find(const std::string& group, const std::string& metric) const;
  // Notes printed to stderr (settings, warnings); kept in the JSON document too.
  void note(const std::string& text);
  // Prints the JSON document (no-op in text mode, where figures were printed as added).
  void finish(std::ostream& out) const;

 private:
  bool json_;
  std::vector<Figure> figures_;
  std::vector<std::string> notes_;
};

// Formats a value the way the text output prints it: integers above 1000, otherwise
// three significant digits.
std::string format_value(double v);

struct Summary {
  double p50 = 0, p99 = 0, mean = 0, max = 0;
  std::size_t count = 0;
};
// Summarises samples (any unit); sorts them in place.
Summary summarize(std::vector<double>& samples);

}  // namespace sandpool::bench
