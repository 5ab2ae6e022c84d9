// poolctl's output: JSON (one object per line, invalid UTF-8 replaced) and the human forms
// of whatever the service returns — aligned tables, human sizes and durations chosen by a
// field's name suffix (docs/poolctl.md, "Output").
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sandpool::poolctl {

// One line of JSON.
void print_json(std::ostream& out, const nlohmann::json& value);

// "512 B", "1.5 KiB", "3.2 MiB".
std::string human_bytes(double bytes);
// "850ms", "12.3s", "4m05s", "2h10m", "3d04h".
std::string human_duration_ms(double ms);
// A field rendered for people: *_bytes as a size, *_ms as a duration (*_at_ms, *_beat_ms and
// time_ms as an age before `now_ms`), booleans yes/no, null "-", strings bare.
std::string human_field(const std::string& key, const nlohmann::json& value, std::int64_t now_ms);
// The header for a field: "rss_bytes" -> "RSS", "tasks_done" -> "TASKS DONE".
std::string human_header(const std::string& key);

// Columns padded to their widest cell, two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Which columns a table shows: every field, or only the chosen ones (the default of
// `stats` and `workers`; `--wide` shows every field).
enum class Columns { kAll, kOnlyPreferred };

// An array of objects as a table: `preferred` columns first (those present), then, with
// Columns::kAll, any other keys in first-seen order; nested objects are spread into columns
// (latency_ms.p50 -> latency_p50_ms), deeper ones and arrays are left out.
void print_object_table(std::ostream& out, const nlohmann::json& rows,
                        const std::vector<std::string>& preferred, std::int64_t now_ms,
                        Columns columns = Columns::kAll);
// An object for people: scalars as aligned "key  value" lines, arrays of objects as tables
// under their name, nested objects as indented sections.
void print_human(std::ostream& out, const nlohmann::json& object, std::int64_t now_ms,
                 int indent = 0);

std::int64_t wall_now_ms();

}  // namespace sandpool::poolctl
