// plugin_config for the regex plugin, read with nlohmann::json at init.
#include "regex_config.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_config.hpp"

namespace {

using nlohmann::json;
using sandpool::plugins::ConfigError;
using sandpool::plugins::parse_count;
using sandpool::plugins::parse_plugin_config;
using sandpool::plugins::parse_size;

constexpr std::uint64_t kMaxJitStack = 1ull << 30;

// A PCRE2 limit: 0 means none, which PCRE2 spells as the largest uint32_t.
std::uint32_t limit32(const json& v, const char* key) {
  const std::uint64_t n = parse_count(v, key);
  if (n > std::numeric_limits<std::uint32_t>::max()) {
    throw ConfigError{std::string(key) + ": at most 4294967295"};
  }
  return n == 0 ? std::numeric_limits<std::uint32_t>::max() : static_cast<std::uint32_t>(n);
}

void parse_into(const json& j, regex_plugin_config* out) {
  if (!j.is_object()) throw ConfigError{"expected a mapping"};
  for (const auto& [key, value] : j.items()) {
    if (key == "match_limit") {
      out->match_limit = limit32(value, "match_limit");
    } else if (key == "depth_limit") {
      out->depth_limit = limit32(value, "depth_limit");
    } else if (key == "heap_limit") {
      const std::uint64_t kib = parse_size(value, "heap_limit") >> 10;
      if (kib > std::numeric_limits<std::uint32_t>::max()) {
        throw ConfigError{"heap_limit: at most 4095GiB"};
      }
      out->heap_limit_kib =
          kib == 0 ? std::numeric_limits<std::uint32_t>::max() : static_cast<std::uint32_t>(kib);
    } else if (key == "jit") {
      if (!value.is_boolean()) throw ConfigError{"jit: expected true or false"};
      out->jit = value.get<bool>() ? 1 : 0;
    } else if (key == "jit_stack") {
      out->jit_stack = parse_size(value, "jit_stack");
      if (out->jit_stack < 32 * 1024 || out->jit_stack > kMaxJitStack) {
        throw ConfigError{"jit_stack: expected 32KiB to 1GiB"};
      }
    } else {
      throw ConfigError{key +
                        ": unknown key (expected one of: match_limit, depth_limit, heap_limit, "
                        "jit, jit_stack)"};
    }
  }
}

}  // namespace

extern "C" int regex_plugin_config_parse(const char* text, std::size_t len,
                                         regex_plugin_config* out, char* err, std::size_t err_len) {
  *out = regex_plugin_config{};
  out->match_limit = REGEX_DEFAULT_MATCH_LIMIT;
  out->depth_limit = REGEX_DEFAULT_DEPTH_LIMIT;
  out->heap_limit_kib = REGEX_DEFAULT_HEAP_LIMIT_KIB;
  out->jit = 1;
  out->jit_stack = REGEX_DEFAULT_JIT_STACK;
  const int rc = parse_plugin_config("regex", text, len, err, err_len,
                                     [&](const json& j) { parse_into(j, out); });
  return rc;
}
