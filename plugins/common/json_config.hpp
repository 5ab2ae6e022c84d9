// What the plugins on real libraries share to read their plugin_config (JSON, at init):
// the error they throw and the size syntax. Header-only, C++ (each plugin's config file).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sandpool::plugins {

// A key of plugin_config that is wrong; the message starts with the key.
struct ConfigError {
  std::string message;
};

// Parses `text` as JSON and hands it to fill(const json&). Returns 0; or -1 with
// "<plugin>: plugin_config: <why>" in err, for bad JSON or what fill throws.
template <typename Fill>
int parse_plugin_config(const char* plugin, const char* text, std::size_t len, char* err,
                        std::size_t err_len, Fill fill) {
  try {
    fill(nlohmann::json::parse(std::string_view(text, len)));
    return 0;
  } catch (const ConfigError& e) {
    std::snprintf(err, err_len, "%s: plugin_config: %s", plugin, e.message.c_str());
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "%s: plugin_config: %s", plugin, e.what());
  }
  return -1;
}

// "64MiB", "512KiB", "1GiB", "100B" or a plain integer of bytes; throws ConfigError naming
// `key` for anything else.
inline std::uint64_t parse_size(const nlohmann::json& v, const char* key) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (!v.is_string()) {
    throw ConfigError{std::string(key) + ": expected a size like 64MiB or a number of bytes"};
  }
  const std::string s = v.get<std::string>();
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  const std::string_view unit = std::string_view(s).substr(digits);
  std::uint64_t shift = 0;
  if (unit == "KiB") {
    shift = 10;
  } else if (unit == "MiB") {
    shift = 20;
  } else if (unit == "GiB") {
    shift = 30;
  } else if (!unit.empty() && unit != "B") {
    digits = 0;  // an unknown unit: refused below
  }
  if (digits == 0 || digits > 12) {
    throw ConfigError{std::string(key) + ": expected a size like 64MiB, got \"" + s + "\""};
  }
  return std::strtoull(s.c_str(), nullptr, 10) << shift;
}

// A count (an unsigned integer), or ConfigError naming `key`.
inline std::uint64_t parse_count(const nlohmann::json& v, const char* key) {
  if (!v.is_number_unsigned())
    throw ConfigError{std::string(key) + ": expected a count (0: no limit)"};
  return v.get<std::uint64_t>();
}

}  // namespace sandpool::plugins
