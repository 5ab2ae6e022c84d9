// plugin_config: the YAML a pool hands its plugin, converted to the JSON text that
// sp_plugin_init receives. Private to config/src/config.
#pragma once

#include <cstddef>
#include <string>

#include "config/yaml_reader.hpp"

namespace sandpool::config {

// Bounds that keep a hostile or mistaken file from blowing up the conversion: aliases can
// make a small YAML file expand exponentially, or refer to their own ancestor. The JSON
// reaches the worker on its command line, whose arguments Linux caps at 128 KiB each.
inline constexpr std::size_t kMaxPluginConfigDepth = 64;
inline constexpr std::size_t kMaxPluginConfigBytes = 64 * 1024;

// Converts `node` (a mapping, or null for `{}`) to compact JSON in *out. Quoted scalars stay
// strings; plain ones become null, true/false, integers or numbers when they read as such
// (YAML 1.2 core schema), else strings. Returns false after recording errors at `path`.
bool plugin_config_to_json(const YAML::Node& node, const std::string& path, ConfigErrors& errors,
                           std::string* out);

}  // namespace sandpool::config
