// plugin_config for the python plugin, read with nlohmann::json at init (no Python call is
// made here).
#include "python_config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_config.hpp"

namespace {

using nlohmann::json;
using sandpool::plugins::ConfigError;
using sandpool::plugins::parse_plugin_config;

char* copy_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw ConfigError{"out of memory"};
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// A dotted Python name: identifiers of ASCII letters, digits and '_', joined by '.'.
bool is_dotted_name(std::string_view s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  char prev = '.';
  for (char c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (c == '.') {
      if (prev == '.') return false;
    } else if (!letter && !(digit && prev != '.')) {
      return false;
    }
    prev = c;
  }
  return true;
}

void parse_handler(const json& v, python_plugin_config* out) {
  if (!v.is_string()) throw ConfigError{"handler: expected \"module:function\""};
  const std::string& s = v.get_ref<const std::string&>();
  const std::size_t colon = s.find(':');
  if (colon == std::string::npos) {
    throw ConfigError{"handler: expected \"module:function\", got \"" + s + "\""};
  }
  const std::string_view module = std::string_view(s).substr(0, colon);
  const std::string_view function = std::string_view(s).substr(colon + 1);
  if (!is_dotted_name(module) || !is_dotted_name(function) ||
      function.find('.') != std::string_view::npos) {
    throw ConfigError{"handler: expected \"module:function\" (Python names), got \"" + s + "\""};
  }
  out->module = copy_string(module);
  out->function = copy_string(function);
}

// A list of strings into a malloc'ed array: module names when `names`, else absolute paths.
char** parse_strings(const json& v, const char* key, std::size_t* count, bool names) {
  if (!v.is_array()) throw ConfigError{std::string(key) + ": expected a list of strings"};
  char** items = static_cast<char**>(std::calloc(v.size() == 0 ? 1 : v.size(), sizeof(char*)));
  if (items == nullptr) throw ConfigError{"out of memory"};
  *count = 0;
  try {
    for (const json& item : v) {
      if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
        throw ConfigError{std::string(key) + ": expected a list of non-empty strings"};
      }
      const std::string& s = item.get_ref<const std::string&>();
      if (names && !is_dotted_name(s)) {
        throw ConfigError{std::string(key) + ": \"" + s + "\" is not a module name"};
      }
      if (!names && s.front() != '/') {
        throw ConfigError{std::string(key) + ": \"" + s +
                          "\" is not an absolute path (the worker's cwd is /)"};
      }
      items[(*count)++] = copy_string(s);
    }
  } catch (...) {
    for (std::size_t i = 0; i < *count; ++i) std::free(items[i]);
    std::free(items);
    *count = 0;
    throw;
  }
  return items;
}

void parse_modules(const json& v, python_plugin_config* out) {
  if (!v.is_object()) throw ConfigError{"modules: expected a mapping of module name to source"};
  const std::size_t n = v.size() == 0 ? 1 : v.size();
  out->module_names = static_cast<char**>(std::calloc(n, sizeof(char*)));
  out->module_sources = static_cast<char**>(std::calloc(n, sizeof(char*)));
  if (out->module_names == nullptr || out->module_sources == nullptr) {
    throw ConfigError{"out of memory"};
  }
  for (const auto& [name, source] : v.items()) {
    if (!is_dotted_name(name) || name.find('.') != std::string::npos) {
      throw ConfigError{"modules: \"" + name + "\" is not a module name (no dots)"};
    }
    if (!source.is_string()) throw ConfigError{"modules." + name + ": expected the Python source"};
    out->module_names[out->module_count] = copy_string(name);
    out->module_sources[out->module_count++] = copy_string(source.get_ref<const std::string&>());
  }
}

bool parse_bool(const json& v, const char* key) {
  if (!v.is_boolean()) throw ConfigError{std::string(key) + ": expected true or false"};
  return v.get<bool>();
}

void parse_into(const json& j, python_plugin_config* out) {
  if (!j.is_object()) throw ConfigError{"expected a mapping"};
  for (const auto& [key, value] : j.items()) {
    if (key == "handler") {
      parse_handler(value, out);
    } else if (key == "path") {
      out->path = parse_strings(value, "path", &out->path_count, false);
    } else if (key == "preload") {
      out->preload = parse_strings(value, "preload", &out->preload_count, true);
    } else if (key == "modules") {
      parse_modules(value, out);
    } else if (key == "late_imports") {
      out->late_imports = parse_bool(value, "late_imports") ? 1 : 0;
    } else if (key == "site") {
      out->site = parse_bool(value, "site") ? 1 : 0;
    } else {
      throw ConfigError{key +
                        ": unknown key (expected one of: handler, path, modules, preload, "
                        "late_imports, site)"};
    }
  }
  if (out->module == nullptr) {
    throw ConfigError{"handler: missing (\"module:function\", e.g. \"tasks:handle\")"};
  }
}

}  // namespace

extern "C" int python_plugin_config_parse(const char* text, std::size_t len,
                                          python_plugin_config* out, char* err,
                                          std::size_t err_len) {
  *out = python_plugin_config{};
  out->site = 1;
  const int rc = parse_plugin_config("python", text, len, err, err_len,
                                     [&](const json& j) { parse_into(j, out); });
  if (rc != 0) python_plugin_config_free(out);
  return rc;
}

extern "C" void python_plugin_config_free(python_plugin_config* config) {
  for (std::size_t i = 0; i < config->path_count; ++i) std::free(config->path[i]);
  for (std::size_t i = 0; i < config->preload_count; ++i) std::free(config->preload[i]);
  for (std::size_t i = 0; i < config->module_count; ++i) {
    std::free(config->module_names[i]);
    std::free(config->module_sources[i]);
  }
  std::free(config->module_names);
  std::free(config->module_sources);
  std::free(config->path);
  std::free(config->preload);
  std::free(config->module);
  std::free(config->function);
  *config = python_plugin_config{};
}
