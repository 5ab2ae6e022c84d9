#include "config/plugin_config_json.hpp"

#include <charconv>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sandpool::config {
namespace {

using nlohmann::json;

// Advances past digits; returns how many there were.
std::size_t skip_digits(std::string_view s, std::size_t* i) {
  const std::size_t from = *i;
  while (*i < s.size() && s[*i] >= '0' && s[*i] <= '9') ++*i;
  return *i - from;
}

// [-+]?[0-9]+ when `is_integer`, else the core schema's float without .inf/.nan:
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool is_number(std::string_view s, bool* is_integer) {
  std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  const std::size_t whole = skip_digits(s, &i);
  *is_integer = whole > 0 && i == s.size();
  if (*is_integer) return true;
  std::size_t fraction = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    fraction = skip_digits(s, &i);
  }
  if (whole == 0 && fraction == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (skip_digits(s, &i) == 0) return false;
  }
  return i == s.size();
}

// The YAML 1.2 core schema's resolution of a plain (unquoted) scalar.
json plain_scalar(const std::string& text) {
  if (text == "null" || text == "Null" || text == "NULL" || text == "~") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  bool integer = false;
  if (!is_number(text, &integer)) return text;  // including .inf and .nan, which JSON lacks
  const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
  const char* end = text.data() + text.size();
  if (integer) {
    std::int64_t i = 0;
    if (auto r = std::from_chars(begin, end, i); r.ec == std::errc() && r.ptr == end) return i;
    std::uint64_t u = 0;
    if (auto r = std::from_chars(begin, end, u); r.ec == std::errc() && r.ptr == end) return u;
  }
  double d = 0;
  if (auto r = std::from_chars(begin, end, d); r.ec == std::errc() && r.ptr == end) return d;
  return text;  // out of range even as a double
}

class Converter {
 public:
  Converter(ConfigErrors& errors, std::string root_path)
      : errors_(errors), root_path_(std::move(root_path)) {}

  // Returns false after recording an error; conversion stops at the first one.
  bool convert(const YAML::Node& node, const std::string& path, std::size_t depth, json* out) {
    if (depth > kMaxPluginConfigDepth) {
      return fail(node, root_path_,
                  "nested deeper than " + std::to_string(kMaxPluginConfigDepth) +
                      " levels (an alias that contains itself?)");
    }
    // Every node costs at least one byte of output: this bounds alias expansion early.
    if (++nodes_ > kMaxPluginConfigBytes) return too_large(node);
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        *out = nullptr;
        return true;
      case YAML::NodeType::Scalar:
        if (node.Tag() == "?") {
          *out = plain_scalar(node.Scalar());
        } else {
          *out = node.Scalar();  // quoted, block or explicitly tagged: the text as written
        }
        return true;
      case YAML::NodeType::Sequence: {
        *out = json::array();
        for (std::size_t i = 0; i < node.size(); ++i) {
          json item;
          if (!convert(node[i], path + "[" + std::to_string(i) + "]", depth + 1, &item)) {
            return false;
          }
          out->push_back(std::move(item));
        }
        return true;
      }
      case YAML::NodeType::Map: {
        *out = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            return fail(kv.first, path, "expected a plain key name, got " + describe(kv.first));
          }
          const std::string& key = kv.first.Scalar();
          const std::string child = path + "." + key;
          if (out->contains(key)) return fail(kv.first, child, "duplicate key");
          json value;
          if (!convert(kv.second, child, depth + 1, &value)) return false;
          (*out)[key] = std::move(value);
        }
        return true;
      }
    }
    return fail(node, path, "unsupported YAML node");
  }

  bool too_large(const YAML::Node& node) {
    return fail(node, root_path_,
                "larger than " + std::to_string(kMaxPluginConfigBytes / 1024) +
                    " KiB as JSON (it reaches the worker on its command line)");
  }

 private:
  bool fail(const YAML::Node& node, const std::string& path, const std::string& message) {
    errors_.add(node.Mark(), path, message);
    return false;
  }

  ConfigErrors& errors_;
  std::string root_path_;  // errors about the whole value name it, not a 64-level path
  std::size_t nodes_ = 0;
};

}  // namespace

bool plugin_config_to_json(const YAML::Node& node, const std::string& path, ConfigErrors& errors,
                           std::string* out) {
  if (!node.IsDefined() || node.IsNull()) {
    *out = "{}";
    return true;
  }
  if (!node.IsMap()) {
    errors.add(node.Mark(), path, "expected a mapping, got " + describe(node));
    return false;
  }
  Converter converter(errors, path);
  json value;
  if (!converter.convert(node, path, 0, &value)) return false;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxPluginConfigBytes) return converter.too_large(node);
  *out = std::move(text);
  return true;
}

}  // namespace sandpool::config
