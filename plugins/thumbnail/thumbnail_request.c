#include "thumbnail_request.h"

#include <stdio.h>
#include <string.h>

/* Which options a payload gave, to refuse one given twice and to apply the defaults. */
enum { GAVE_WIDTH = 1, GAVE_HEIGHT = 2, GAVE_FORMAT = 4, GAVE_QUALITY = 8 };

/* A plain decimal in [lo, hi]: 0 and *out, or -1. */
static int parse_number(const char* text, size_t len, uint32_t lo, uint32_t hi, uint32_t* out) {
  uint32_t v = 0;
  size_t i;
  if (len == 0 || len > 5) return -1;
  for (i = 0; i < len; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (uint32_t)(text[i] - '0');
  }
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int is_key(const char* key, size_t len, const char* name) {
  return strlen(name) == len && memcmp(key, name, len) == 0;
}

/* One key=value; 0, or -1 with why in err. */
static int parse_option(const char* opt, size_t len, thumbnail_request* out, unsigned* gave,
                        char* err, size_t err_len) {
  const char* eq = (const char*)memchr(opt, '=', len);
  const size_t key_len = eq == NULL ? len : (size_t)(eq - opt);
  const char* value = eq == NULL ? opt + len : eq + 1;
  const size_t value_len = eq == NULL ? 0 : len - key_len - 1;
  unsigned bit;
  int ok;
  uint32_t n = 0;
  if (is_key(opt, key_len, "width")) {
    bit = GAVE_WIDTH;
    ok = parse_number(value, value_len, 1, THUMBNAIL_MAX_BOX, &out->width) == 0;
  } else if (is_key(opt, key_len, "height")) {
    bit = GAVE_HEIGHT;
    ok = parse_number(value, value_len, 1, THUMBNAIL_MAX_BOX, &out->height) == 0;
  } else if (is_key(opt, key_len, "quality")) {
    bit = GAVE_QUALITY;
    ok = parse_number(value, value_len, 1, 100, &n) == 0;
    out->quality = (int)n;
  } else if (is_key(opt, key_len, "format")) {
    bit = GAVE_FORMAT;
    ok = 1;
    if (is_key(value, value_len, "png")) {
      out->format = THUMB_OUT_PNG;
    } else if (is_key(value, value_len, "jpeg") || is_key(value, value_len, "jpg")) {
      out->format = THUMB_OUT_JPEG;
    } else {
      ok = 0;
    }
  } else {
    snprintf(err, err_len, "thumbnail: unknown option '%.*s' (width, height, format, quality)",
             (int)key_len, opt);
    return -1;
  }
  if (!ok) {
    snprintf(err, err_len, "thumbnail: option '%.*s': expected %s", (int)len, opt,
             bit == GAVE_FORMAT    ? "format=png or format=jpeg"
             : bit == GAVE_QUALITY ? "quality=1 to quality=100"
                                   : "a size of 1 to 65535 pixels");
    return -1;
  }
  if (*gave & bit) {
    snprintf(err, err_len, "thumbnail: option '%.*s' given twice", (int)key_len, opt);
    return -1;
  }
  *gave |= bit;
  return 0;
}

/* The options text: printable ASCII, split at spaces. */
static int parse_options(const char* text, size_t len, thumbnail_request* out, unsigned* gave,
                         char* err, size_t err_len) {
  size_t at = 0, i;
  for (i = 0; i < len; ++i) {
    if (text[i] < 0x20 || text[i] > 0x7e) {
      snprintf(err, err_len,
               "thumbnail: the options before the first NUL are not text: the payload is "
               "<options> NUL <image>, and a payload of the image alone needs a NUL in front");
      return -1;
    }
  }
  while (at < len) {
    const char* space = (const char*)memchr(text + at, ' ', len - at);
    const size_t end = space == NULL ? len : (size_t)(space - text);
    if (end > at && parse_option(text + at, end - at, out, gave, err, err_len) != 0) return -1;
    at = end + 1;
  }
  return 0;
}

int thumbnail_request_parse(const uint8_t* payload, size_t len,
                            const thumbnail_plugin_config* defaults, thumbnail_request* out,
                            char* err, size_t err_len) {
  const size_t scan = len < THUMBNAIL_MAX_OPTIONS + 1 ? len : THUMBNAIL_MAX_OPTIONS + 1;
  const uint8_t* nul = (const uint8_t*)memchr(payload, '\0', scan);
  unsigned gave = 0;
  memset(out, 0, sizeof *out);
  if (nul == NULL) {
    snprintf(err, err_len,
             len == 0 ? "thumbnail: the payload is empty: it is <options> NUL <image>"
                      : "thumbnail: the payload is <options> NUL <image>, options at most 256 "
                        "bytes; found no NUL");
    return -1;
  }
  if (parse_options((const char*)payload, (size_t)(nul - payload), out, &gave, err, err_len) != 0) {
    return -1;
  }
  if (!(gave & (GAVE_WIDTH | GAVE_HEIGHT))) {
    out->width = defaults->width;
    out->height = defaults->height;
  }
  if (!(gave & GAVE_FORMAT)) out->format = defaults->format;
  if (!(gave & GAVE_QUALITY)) out->quality = defaults->quality;
  if ((gave & GAVE_QUALITY) && out->format != THUMB_OUT_JPEG) {
    snprintf(err, err_len, "thumbnail: quality is for format=jpeg");
    return -1;
  }
  out->image = nul + 1;
  out->image_len = len - (size_t)(nul - payload) - 1;
  return 0;
}
