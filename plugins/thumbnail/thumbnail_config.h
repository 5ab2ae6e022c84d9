/* The thumbnail plugin's plugin_config (docs/plugin-guide.md, "thumbnail"), parsed once in
 * init: the limits every image is checked against, and the defaults of the payload's options. */
#ifndef SANDPOOL_THUMBNAIL_CONFIG_H
#define SANDPOOL_THUMBNAIL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum thumb_output { THUMB_OUT_PNG, THUMB_OUT_JPEG } thumb_output;

typedef struct thumbnail_plugin_config {
  uint64_t max_pixels; /* width x height the file declares; 0: none */
  uint32_t max_width;  /* 0: none */
  uint32_t max_height; /* 0: none */
  uint32_t width;      /* the box of a task that names neither width nor height */
  uint32_t height;
  thumb_output format; /* of a task that names none */
  int quality;         /* JPEG quality of a task that names none, 1..100 */
} thumbnail_plugin_config;

#define THUMBNAIL_DEFAULT_MAX_PIXELS 50000000u /* 50 MP: 200 MB decoded as RGBA */
#define THUMBNAIL_DEFAULT_MAX_SIDE 20000u
#define THUMBNAIL_DEFAULT_BOX 128u
#define THUMBNAIL_DEFAULT_QUALITY 85
#define THUMBNAIL_MAX_BOX 65535u

/* Parses the JSON object `json` (len bytes) into *out, defaults first. Returns 0, or -1
 * after writing a message naming the bad key into err (NUL-terminated). */
int thumbnail_plugin_config_parse(const char* json, size_t len, thumbnail_plugin_config* out,
                                  char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_THUMBNAIL_CONFIG_H */
