#include "config/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <sandpool/units/units.hpp>

namespace sandpool::config {

void ConfigErrors::add(const YAML::Mark& mark, std::string_view path, std::string_view message) {
  entries_.push_back({mark.line, mark.column, format(mark, path, message)});
}

std::string ConfigErrors::format(const YAML::Mark& mark, std::string_view path,
                                 std::string_view message) const {
  std::string text = source_;
  if (!mark.is_null()) {
    text += ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
  }
  text += ": ";
  if (!path.empty()) {
    text += path;
    text += ": ";
  }
  text += message;
  return text;
}

Status ConfigErrors::status() const {
  if (entries_.empty()) return Status::ok();
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->line, a->column) < std::pair(b->line, b->column);
  });
  std::string message;
  for (std::size_t i = 0; i < sorted.size() && i < kMaxReported; ++i) {
    if (i > 0) message += '\n';
    message += sorted[i]->text;
  }
  if (sorted.size() > kMaxReported) {
    message += "\n(" + std::to_string(sorted.size() - kMaxReported) + " more errors not shown)";
  }
  return Status::invalid(std::move(message));
}

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (!node.IsScalar()) return "nothing";
  constexpr std::size_t kShown = 40;
  const std::string& text = node.Scalar();
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kShown) out += "...";
  return out + '"';
}

MapReader::MapReader(ConfigErrors& errors, const YAML::Node& node, std::string path)
    : errors_(errors), node_(node), path_(std::move(path)) {
  if (!node_.IsDefined() || node_.IsNull()) return;
  if (!node_.IsMap()) {
    errors_.add(node_.Mark(), path_, "expected a mapping, got " + describe(node_));
    return;
  }
  for (const auto& kv : node_) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      errors_.add(key.Mark(), path_, "expected a plain key name, got " + describe(key));
      continue;
    }
    if (find(key.Scalar()) != nullptr) {
      errors_.add(key.Mark(), path_of(key.Scalar()), "duplicate key");
      continue;
    }
    entries_.push_back({key.Scalar(), key, kv.second, false});
  }
}

MapReader::Entry* MapReader::find(std::string_view key) {
  for (Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

bool MapReader::has(std::string_view key) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.key == key; });
}

std::string MapReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

// yaml-cpp places an empty value at the next token, often on the next line: point at its key.
YAML::Mark MapReader::mark_of(const Entry& e) {
  return e.value.IsNull() ? e.key_node.Mark() : e.value.Mark();
}

void MapReader::expected(Entry& e, std::string_view what) {
  errors_.add(mark_of(e), path_of(e.key),
              "expected " + std::string(what) + ", got " + describe(e.value));
}

void MapReader::fail(std::string_view key, std::string_view message) {
  Entry* e = find(key);
  errors_.add(e != nullptr ? mark_of(*e) : node_.Mark(), path_of(key), message);
}

const YAML::Node* MapReader::value(std::string_view key) {
  asked_.emplace_back(key);
  Entry* e = find(key);
  if (e == nullptr) return nullptr;
  e->used = true;
  return &e->value;
}

const std::string* MapReader::scalar(std::string_view key, std::string_view what) {
  const YAML::Node* v = value(key);
  if (v == nullptr) return nullptr;
  if (!v->IsScalar() || v->Scalar().empty()) {
    expected(*find(key), what);
    return nullptr;
  }
  return &v->Scalar();
}

bool MapReader::string(std::string_view key, std::string* out) {
  const std::string* text = scalar(key, "a non-empty string");
  if (text == nullptr) return false;
  *out = *text;
  return true;
}

bool MapReader::string_list(std::string_view key, std::vector<std::string>* out) {
  const YAML::Node* v = value(key);
  if (v == nullptr) return false;
  if (!v->IsSequence()) {
    expected(*find(key), "a list of strings");
    return false;
  }
  std::vector<std::string> items;
  bool ok = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const YAML::Node item = (*v)[i];
    if (!item.IsScalar() || item.Scalar().empty()) {
      errors_.add(item.Mark(), path_of(key) + "[" + std::to_string(i) + "]",
                  "expected a non-empty string, got " + describe(item));
      ok = false;
      continue;
    }
    items.push_back(item.Scalar());
  }
  if (ok) *out = std::move(items);
  return ok;
}

bool MapReader::boolean(std::string_view key, bool* out) {
  return choice<bool>(key, out, {{"true", true}, {"false", false}});
}

bool MapReader::count(std::string_view key, std::uint64_t* out, std::uint64_t min,
                      std::uint64_t max) {
  const std::string what =
      max == UINT64_MAX ? "an integer >= " + std::to_string(min)
                        : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const std::string* text = scalar(key, what);
  if (text == nullptr) return false;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < min || v > max) {
    expected(*find(key), what);
    return false;
  }
  *out = v;
  return true;
}

bool MapReader::count(std::string_view key, std::uint32_t* out, std::uint32_t min) {
  std::uint64_t v = 0;
  if (!count(key, &v, min, UINT32_MAX)) return false;
  *out = static_cast<std::uint32_t>(v);
  return true;
}

bool MapReader::real(std::string_view key, double* out, double min) {
  std::string what = "a number >= " + std::to_string(min);
  what.erase(what.find_last_not_of('0') + 1);  // "1.000000" -> "1."
  if (what.back() == '.') what.pop_back();
  const std::string* text = scalar(key, what);
  if (text == nullptr) return false;
  double v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || !(v >= min) || v > 1e9) {
    expected(*find(key), what);
    return false;
  }
  *out = v;
  return true;
}

bool MapReader::size(std::string_view key, std::uint64_t* out, std::uint64_t min) {
  const std::string what =
      min == 0 ? "a size like 256MiB"
               : "a size of at least " + std::to_string(min) + " bytes, like 256MiB";
  const std::string* text = scalar(key, what);
  if (text == nullptr) return false;
  auto v = parse_size(*text);
  if (!v || *v < min) {
    expected(*find(key), what);
    return false;
  }
  *out = *v;
  return true;
}

bool MapReader::duration(std::string_view key, Millis* out, Millis min) {
  const std::string what =
      min.count() == 0 ? "a duration like 250ms or 30s"
                       : "a duration of at least " + std::to_string(min.count()) + "ms, like 30s";
  const std::string* text = scalar(key, what);
  if (text == nullptr) return false;
  auto v = parse_duration(*text, Millis(0));  // a unit is required
  if (!v || *v < min) {
    expected(*find(key), what);
    return false;
  }
  *out = *v;
  return true;
}

MapReader MapReader::section(std::string_view key) {
  const YAML::Node* v = value(key);
  return MapReader(errors_, v != nullptr ? *v : YAML::Node(), path_of(key));
}

void MapReader::finish() {
  if (finished_) return;
  finished_ = true;
  std::string known;
  for (std::size_t i = 0; i < asked_.size(); ++i) {
    if (std::find(asked_.begin(), asked_.begin() + i, asked_[i]) != asked_.begin() + i) continue;
    known += (known.empty() ? "" : ", ") + asked_[i];
  }
  for (const Entry& e : entries_) {
    if (e.used) continue;
    errors_.add(e.key_node.Mark(), path_of(e.key),
                known.empty() ? "unknown key" : "unknown key (expected one of: " + known + ")");
  }
}

}  // namespace sandpool::config
