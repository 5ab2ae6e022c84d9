// plugin_config for the thumbnail plugin, read with nlohmann::json at init.
#include "thumbnail_config.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_config.hpp"

namespace {

using nlohmann::json;
using sandpool::plugins::ConfigError;
using sandpool::plugins::parse_count;
using sandpool::plugins::parse_plugin_config;

// A count within [lo, hi], or ConfigError naming `key`.
std::uint32_t bounded(const json& v, const char* key, std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t n = parse_count(v, key);
  if (n < lo || n > hi) {
    throw ConfigError{std::string(key) + ": expected " + std::to_string(lo) + " to " +
                      std::to_string(hi)};
  }
  return static_cast<std::uint32_t>(n);
}

void parse_into(const json& j, thumbnail_plugin_config* out) {
  if (!j.is_object()) throw ConfigError{"expected a mapping"};
  for (const auto& [key, value] : j.items()) {
    if (key == "max_pixels") {
      out->max_pixels = parse_count(value, "max_pixels");
    } else if (key == "max_width") {
      out->max_width = bounded(value, "max_width", 0, UINT32_MAX);
    } else if (key == "max_height") {
      out->max_height = bounded(value, "max_height", 0, UINT32_MAX);
    } else if (key == "width") {
      out->width = bounded(value, "width", 1, THUMBNAIL_MAX_BOX);
    } else if (key == "height") {
      out->height = bounded(value, "height", 1, THUMBNAIL_MAX_BOX);
    } else if (key == "quality") {
      out->quality = static_cast<int>(bounded(value, "quality", 1, 100));
    } else if (key == "format") {
      if (value == "png") {
        out->format = THUMB_OUT_PNG;
      } else if (value == "jpeg") {
        out->format = THUMB_OUT_JPEG;
      } else {
        throw ConfigError{"format: expected \"png\" or \"jpeg\""};
      }
    } else {
      throw ConfigError{key +
                        ": unknown key (expected one of: max_pixels, max_width, max_height, "
                        "width, height, format, quality)"};
    }
  }
}

}  // namespace

extern "C" int thumbnail_plugin_config_parse(const char* text, std::size_t len,
                                             thumbnail_plugin_config* out, char* err,
                                             std::size_t err_len) {
  *out = thumbnail_plugin_config{};
  out->max_pixels = THUMBNAIL_DEFAULT_MAX_PIXELS;
  out->max_width = THUMBNAIL_DEFAULT_MAX_SIDE;
  out->max_height = THUMBNAIL_DEFAULT_MAX_SIDE;
  out->width = THUMBNAIL_DEFAULT_BOX;
  out->height = THUMBNAIL_DEFAULT_BOX;
  out->format = THUMB_OUT_PNG;
  out->quality = THUMBNAIL_DEFAULT_QUALITY;
  const int rc = parse_plugin_config("thumbnail", text, len, err, err_len,
                                     [&](const json& j) { parse_into(j, out); });
  return rc;
}
