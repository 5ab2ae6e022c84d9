#include "output.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_time_point(const std::string& key) {
  return key == "time_ms" || ends_with(key, "_at_ms") || ends_with(key, "_beat_ms") ||
         key == "started_ms" || key == "ended_ms" || key == "dead_lettered_ms" ||
         key == "not_before_ms" || key == "submitted_ms";
}

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

std::string scalar_text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool is_table(const json& v) {
  return v.is_array() && !v.empty() &&
         std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_object(); });
}

// A row's cells: scalars as they are, one level of nested object spread into columns
// ("latency_ms": {"p50"} -> "latency_p50_ms", so the unit suffix still applies); arrays,
// deeper objects and multi-line text (backtraces) left out.
json flatten_row(const json& row) {
  json flat = json::object();
  auto single_line = [](const json& v) {
    return !v.is_string() || v.get<std::string>().find('\n') == std::string::npos;
  };
  for (const auto& [k, v] : row.items()) {
    if (!v.is_structured()) {
      if (single_line(v)) flat[k] = v;
      continue;
    }
    if (!v.is_object()) continue;
    std::string base = k, suffix;
    for (std::string_view s : {"_bytes", "_ms"}) {
      if (ends_with(base, s)) {
        base.resize(base.size() - s.size());
        suffix = s;
      }
    }
    for (const auto& [sub, sv] : v.items()) {
      if (!sv.is_structured() && single_line(sv)) flat[base + "_" + sub + suffix] = sv;
    }
  }
  return flat;
}

}  // namespace

void print_json(std::ostream& out, const json& value) {
  out << value.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

std::string human_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return format("%.0f B", bytes);
  return format(bytes < 10 ? "%.1f " : "%.0f ", bytes) + units[u];
}

std::string human_duration_ms(double ms) {
  if (ms < 0) return "-" + human_duration_ms(-ms);
  if (ms < 1) return format("%.2fms", ms);
  if (ms < 10) return format("%.1fms", ms);
  if (ms < 1000) return format("%.0fms", ms);
  const double s = ms / 1000;
  if (s < 60) return format("%.1fs", s);
  char buf[64];
  const auto whole = static_cast<long long>(s);
  if (whole < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", whole / 60, whole % 60);
  } else if (whole < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", whole / 3600, whole / 60 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", whole / 86400, whole / 3600 % 24);
  }
  return buf;
}

std::string human_field(const std::string& key, const json& value, std::int64_t now_ms) {
  if (!value.is_number()) return scalar_text(value);
  const double v = value.get<double>();
  if (ends_with(key, "_bytes")) return human_bytes(v);
  if (is_time_point(key)) {
    if (v <= 0) return "-";
    return v > now_ms ? "in " + human_duration_ms(v - now_ms)
                      : human_duration_ms(now_ms - v) + " ago";
  }
  if (ends_with(key, "_ms")) return human_duration_ms(v);
  if (value.is_number_float()) return format(v < 100 ? "%.2f" : "%.0f", v);
  return scalar_text(value);
}

std::string human_header(const std::string& key) {
  std::string k = key;
  for (const char* suffix : {"_bytes", "_ms"}) {
    if (ends_with(k, suffix) && k.size() > std::string_view(suffix).size()) {
      k.resize(k.size() - std::string_view(suffix).size());
    }
  }
  for (char& c : k)
    c = c == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return k;
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(headers_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  widen(headers_);
  for (const auto& r : rows_) widen(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      s += cell;
      if (i + 1 < width.size()) s += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
}

void print_object_table(std::ostream& out, const json& rows,
                        const std::vector<std::string>& preferred, std::int64_t now_ms,
                        Columns columns) {
  json flat = json::array();
  for (const json& r : rows) flat.push_back(flatten_row(r));
  std::vector<std::string> keys;
  auto seen = [&](const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  for (const auto& k : preferred) {
    for (const json& r : flat) {
      if (r.contains(k) && !seen(k)) keys.push_back(k);
    }
  }
  for (const json& r : flat) {
    if (columns == Columns::kOnlyPreferred) break;
    for (const auto& [k, v] : r.items()) {
      if (!seen(k)) keys.push_back(k);
    }
  }
  std::vector<std::string> headers;
  for (const auto& k : keys) headers.push_back(human_header(k));
  Table table(std::move(headers));
  for (const json& r : flat) {
    std::vector<std::string> cells;
    for (const auto& k : keys) cells.push_back(r.contains(k) ? human_field(k, r[k], now_ms) : "-");
    table.add(std::move(cells));
  }
  table.print(out);
}

void print_human(std::ostream& out, const json& object, std::int64_t now_ms, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::size_t key_width = 0;
  for (const auto& [k, v] : object.items()) {
    if (!v.is_structured() || (v.is_array() && !is_table(v)))
      key_width = std::max(key_width, k.size());
  }
  for (const auto& [k, v] : object.items()) {
    if (v.is_structured() && !(v.is_array() && !is_table(v))) continue;
    std::string text = v.is_array() ? "" : human_field(k, v, now_ms);
    if (v.is_array()) {
      for (const json& e : v) text += (text.empty() ? "" : ", ") + human_field(k, e, now_ms);
    }
    out << pad << k << ":" << std::string(key_width - k.size() + 2, ' ') << text << "\n";
  }
  for (const auto& [k, v] : object.items()) {
    if (v.is_object()) {
      out << pad << k << ":\n";
      print_human(out, v, now_ms, indent + 2);
    } else if (is_table(v)) {
      out << "\n" << pad << k << ":\n";
      print_object_table(out, v, {"name", "id", "pid", "pool", "state"}, now_ms);
    }
  }
}

std::int64_t wall_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace sandpool::poolctl
