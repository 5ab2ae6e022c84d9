// plugin_config for the lua plugin, read with nlohmann::json (init only: nothing here runs
// under the final seccomp filter, and no Lua call is made, so no longjmp crosses C++ frames).
#include "lua_config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json_config.hpp"

namespace {

using nlohmann::json;
using sandpool::plugins::ConfigError;
using sandpool::plugins::parse_count;
using sandpool::plugins::parse_plugin_config;
using sandpool::plugins::parse_size;

char* copy_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw ConfigError{"out of memory"};
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

void parse_scripts(const json& scripts, lua_plugin_config* out) {
  if (!scripts.is_object()) throw ConfigError{"scripts: expected a mapping of name to source"};
  out->scripts = static_cast<lua_named_script*>(
      std::calloc(scripts.size() == 0 ? 1 : scripts.size(), sizeof(lua_named_script)));
  if (out->scripts == nullptr) throw ConfigError{"out of memory"};
  for (const auto& [name, source] : scripts.items()) {
    if (name.empty()) throw ConfigError{"scripts: a script needs a name"};
    if (!source.is_string()) throw ConfigError{"scripts." + name + ": expected the Lua source"};
    const std::string& text = source.get_ref<const std::string&>();
    lua_named_script& s = out->scripts[out->script_count++];
    s.name = copy_string(name);
    s.source = copy_string(text);
    s.source_len = text.size();
  }
}

void parse_into(const json& j, lua_plugin_config* out) {
  if (!j.is_object()) throw ConfigError{"expected a mapping"};
  for (const auto& [key, value] : j.items()) {
    if (key == "max_instructions") {
      out->max_instructions = parse_count(value, "max_instructions");
    } else if (key == "max_memory") {
      out->max_memory = parse_size(value, "max_memory");
    } else if (key == "allow_payload_scripts") {
      if (!value.is_boolean()) throw ConfigError{"allow_payload_scripts: expected true or false"};
      out->allow_payload_scripts = value.get<bool>() ? 1 : 0;
    } else if (key == "scripts") {
      parse_scripts(value, out);
    } else {
      throw ConfigError{key +
                        ": unknown key (expected one of: max_instructions, max_memory, "
                        "allow_payload_scripts, scripts)"};
    }
  }
}

}  // namespace

extern "C" int lua_plugin_config_parse(const char* text, std::size_t len, lua_plugin_config* out,
                                       char* err, std::size_t err_len) {
  *out = lua_plugin_config{};
  out->max_instructions = LUA_PLUGIN_DEFAULT_MAX_INSTRUCTIONS;
  out->max_memory = LUA_PLUGIN_DEFAULT_MAX_MEMORY;
  out->allow_payload_scripts = 1;
  const int rc = parse_plugin_config("lua", text, len, err, err_len,
                                     [&](const json& j) { parse_into(j, out); });
  if (rc != 0) lua_plugin_config_free(out);
  return rc;
}

extern "C" void lua_plugin_config_free(lua_plugin_config* config) {
  for (std::size_t i = 0; i < config->script_count; ++i) {
    std::free(config->scripts[i].name);
    std::free(config->scripts[i].source);
  }
  std::free(config->scripts);
  *config = lua_plugin_config{};
}

extern "C" const lua_named_script* lua_plugin_config_find(const lua_plugin_config* config,
                                                          const char* name, std::size_t name_len) {
  for (std::size_t i = 0; i < config->script_count; ++i) {
    const lua_named_script& s = config->scripts[i];
    if (std::strlen(s.name) == name_len && std::memcmp(s.name, name, name_len) == 0) return &s;
  }
  return nullptr;
}
