/* A thumbnail task's payload, split (docs/plugin-guide.md, "thumbnail"):
 *   <options> NUL <image bytes>
 * <options> is ASCII text, at most 256 bytes, of space-separated key=value pairs:
 * width=N, height=N (1..65535: the box the thumbnail fits in), format=png|jpeg,
 * quality=N (1..100, jpeg only); empty for the pool's defaults. */
#ifndef SANDPOOL_THUMBNAIL_REQUEST_H
#define SANDPOOL_THUMBNAIL_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "thumbnail_config.h"

#define THUMBNAIL_MAX_OPTIONS 256

typedef struct thumbnail_request {
  uint32_t width; /* the box; 0 leaves a side free (only one was given) */
  uint32_t height;
  thumb_output format;
  int quality;
  const uint8_t* image; /* into the payload */
  size_t image_len;
} thumbnail_request;

/* Splits and checks the payload, the options not given taken from `defaults`. Returns 0, or
 * -1 with why in err. */
int thumbnail_request_parse(const uint8_t* payload, size_t len,
                            const thumbnail_plugin_config* defaults, thumbnail_request* out,
                            char* err, size_t err_len);

#endif /* SANDPOOL_THUMBNAIL_REQUEST_H */
