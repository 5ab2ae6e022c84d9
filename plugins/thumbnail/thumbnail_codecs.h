/* The thumbnail plugin's decoders (JPEG through libjpeg-turbo, PNG through libpng, WebP
 * through libwebp) and encoders (PNG, JPEG). Each is a C function that keeps libjpeg's and
 * libpng's setjmp/longjmp error recovery inside itself: a malformed file ends in a status and
 * a message, never in abort() or a jump out of the function. On failure nothing is left
 * allocated; on success the caller frees image->pixels or buffer->data. */
#ifndef SANDPOOL_THUMBNAIL_CODECS_H
#define SANDPOOL_THUMBNAIL_CODECS_H

#include <stddef.h>
#include <stdint.h>

#include "thumbnail_image.h"

typedef enum thumb_format { THUMB_JPEG, THUMB_PNG, THUMB_WEBP, THUMB_UNKNOWN } thumb_format;

/* The format the first bytes announce (the files' signatures), or THUMB_UNKNOWN. */
thumb_format thumb_sniff(const uint8_t* data, size_t len);

/* Decode `len` bytes into *out, RGB or RGBA, after checking the declared size against
 * `limits`. THUMB_LIMIT when a limit refuses it (nothing decoded), THUMB_INVALID when the
 * data is malformed, truncated or of a kind not supported (CMYK JPEG, animated WebP). */
thumb_status thumb_decode_jpeg(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                               thumb_image* out, thumb_error* err);
thumb_status thumb_decode_png(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                              thumb_image* out, thumb_error* err);
thumb_status thumb_decode_webp(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                               thumb_image* out, thumb_error* err);

/* A growing output buffer (malloc'd data) that never holds more than `max` bytes (the
 * task's max_result), so an encoder stops as soon as its output would pass it. */
typedef struct thumb_buffer {
  uint8_t* data;
  size_t len;
  size_t cap;
  size_t max; /* 0: none */
} thumb_buffer;

/* Appends n bytes; 0, -1 when out of memory, or THUMB_BUFFER_FULL when they would pass max
 * (nothing appended). */
#define THUMB_BUFFER_FULL 1
int thumb_buffer_append(thumb_buffer* b, const void* bytes, size_t n);

/* Writes why an append failed (rc: thumb_buffer_append's) into message. */
void thumb_buffer_refusal(const thumb_buffer* b, int rc, char* message, size_t message_len);

/* Encode `image` as a PNG (8-bit RGB or RGBA, zlib level 6) or a baseline JPEG of `quality`
 * 1..100 (an alpha channel composited over white) into *out. */
thumb_status thumb_encode_png(const thumb_image* image, thumb_buffer* out, thumb_error* err);
thumb_status thumb_encode_jpeg(const thumb_image* image, int quality, thumb_buffer* out,
                               thumb_error* err);

#endif /* SANDPOOL_THUMBNAIL_CODECS_H */
