#include "thumbnail_image.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thumbnail_codecs.h"

thumb_status thumb_fail(thumb_error* err, thumb_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->text, sizeof err->text, fmt, ap);
  va_end(ap);
  return status;
}

thumb_status thumb_check_size(const thumb_decode_limits* limits, uint64_t width, uint64_t height,
                              const char* format, thumb_error* err) {
  if (width == 0 || height == 0) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: %s: the image is %llux%llu", format,
                      (unsigned long long)width, (unsigned long long)height);
  }
  if (limits->max_pixels != 0 && width * height > limits->max_pixels) {
    return thumb_fail(err, THUMB_LIMIT,
                      "thumbnail: %s: the image is %llux%llu = %llu pixels, more than max_pixels "
                      "%llu",
                      format, (unsigned long long)width, (unsigned long long)height,
                      (unsigned long long)(width * height), (unsigned long long)limits->max_pixels);
  }
  if (limits->max_width != 0 && width > limits->max_width) {
    return thumb_fail(err, THUMB_LIMIT,
                      "thumbnail: %s: the image is %llu pixels wide, more than max_width %lu",
                      format, (unsigned long long)width, (unsigned long)limits->max_width);
  }
  if (limits->max_height != 0 && height > limits->max_height) {
    return thumb_fail(err, THUMB_LIMIT,
                      "thumbnail: %s: the image is %llu pixels high, more than max_height %lu",
                      format, (unsigned long long)height, (unsigned long)limits->max_height);
  }
  return THUMB_OK;
}

thumb_status thumb_image_alloc(thumb_image* image, uint32_t width, uint32_t height,
                               uint32_t channels, thumb_error* err) {
  /* width and height are below 2^32 each: the product fits 64 bits, times 4 too. */
  const uint64_t bytes = (uint64_t)width * height * channels;
  image->width = width;
  image->height = height;
  image->channels = channels;
  image->pixels = NULL;
  if (bytes > (uint64_t)SIZE_MAX / 2) {
    return thumb_fail(err, THUMB_LIMIT, "thumbnail: %ux%u pixels do not fit in memory",
                      (unsigned)width, (unsigned)height);
  }
  image->pixels = (uint8_t*)malloc((size_t)bytes);
  if (image->pixels == NULL) {
    return thumb_fail(err, THUMB_LIMIT,
                      "thumbnail: out of memory: the decoded %ux%u image needs %llu bytes",
                      (unsigned)width, (unsigned)height, (unsigned long long)bytes);
  }
  return THUMB_OK;
}

thumb_format thumb_sniff(const uint8_t* data, size_t len) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return THUMB_JPEG;
  if (len >= 8 && memcmp(data, kPng, 8) == 0) return THUMB_PNG;
  if (len >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) {
    return THUMB_WEBP;
  }
  return THUMB_UNKNOWN;
}

int thumb_buffer_append(thumb_buffer* b, const void* bytes, size_t n) {
  if (b->max != 0 && n > b->max - b->len) return THUMB_BUFFER_FULL;
  if (n > b->cap - b->len) {
    size_t cap = b->cap == 0 ? 16384 : b->cap;
    uint8_t* grown;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) return -1;
      cap *= 2;
    }
    if (b->max != 0 && cap > b->max) cap = b->max; /* never more than the result may be */
    grown = (uint8_t*)realloc(b->data, cap);
    if (grown == NULL) return -1;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, bytes, n);
  b->len += n;
  return 0;
}

void thumb_buffer_refusal(const thumb_buffer* b, int rc, char* message, size_t message_len) {
  if (rc == THUMB_BUFFER_FULL) {
    snprintf(message, message_len, "the encoded image would exceed max_result (%zu bytes)", b->max);
  } else {
    snprintf(message, message_len, "out of memory");
  }
}
