#include <sandpool/units/units.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

namespace sandpool {
namespace {

// Splits "12.5ms" into 12.5 and "ms". Returns false when no number leads.
bool split_number(std::string_view text, double* value, std::string_view* unit) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  const std::string num(text.substr(0, i));
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), *value);
  if (ec != std::errc() || end != num.data() + num.size()) return false;
  *unit = text.substr(i);
  while (!unit->empty() && unit->front() == ' ') unit->remove_prefix(1);
  return true;
}

}  // namespace

Result<std::chrono::milliseconds> parse_duration(std::string_view text,
                                                 std::chrono::milliseconds bare_unit) {
  double v = 0;
  std::string_view unit;
  if (!split_number(text, &v, &unit)) {
    return Status::invalid("bad duration '" + std::string(text) + "' (try 250ms, 30s, 1m)");
  }
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60000}, {"min", 60000}, {"h", 3600000}};
  double ms = -1;
  if (unit.empty() && bare_unit.count() == 0 && v != 0) {
    return Status::invalid("bad duration '" + std::string(text) +
                           "' (a unit is required: ms, s, m, h)");
  }
  if (unit.empty()) {
    ms = v * static_cast<double>(bare_unit.count());
  } else {
    for (auto [name, factor] : kUnits) {
      if (unit == name) ms = v * factor;
    }
  }
  if (ms < 0 || !std::isfinite(ms) || ms > 1e15) {
    return Status::invalid("bad duration '" + std::string(text) + "' (units: ms, s, m, h)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

Result<std::uint64_t> parse_size(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!split_number(text, &v, &unit)) {
    return Status::invalid("bad size '" + std::string(text) + "' (try 512, 64KiB, 256MiB)");
  }
  static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1},
                                                                   {"B", 1},
                                                                   {"KiB", 1024.0},
                                                                   {"MiB", 1048576.0},
                                                                   {"GiB", 1073741824.0},
                                                                   {"KB", 1e3},
                                                                   {"MB", 1e6},
                                                                   {"GB", 1e9},
                                                                   {"K", 1024.0},
                                                                   {"M", 1048576.0},
                                                                   {"G", 1073741824.0}};
  for (auto [name, factor] : kUnits) {
    if (unit != name) continue;
    const double bytes = v * factor;
    if (!std::isfinite(bytes) || bytes > 1.8e19) break;
    return static_cast<std::uint64_t>(std::llround(bytes));
  }
  return Status::invalid("bad size '" + std::string(text) +
                         "' (units: B, KiB, MiB, GiB, KB, MB, GB)");
}

}  // namespace sandpool
