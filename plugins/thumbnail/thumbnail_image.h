/* What the thumbnail plugin's decoders, resizer and encoders share: a decoded image, the
 * limits a decoder checks from the header before it allocates, and an error message buffer.
 * Plain C: the decoders and encoders recover from libjpeg's and libpng's errors with
 * longjmp, which must not cross anything with a destructor. */
#ifndef SANDPOOL_THUMBNAIL_IMAGE_H
#define SANDPOOL_THUMBNAIL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* 8-bit pixels, rows of width * channels bytes, no padding; channels is 3 (RGB) or 4 (RGBA,
 * straight alpha). Owned by whoever holds the struct: free(pixels). A decoder also sets the
 * size the file declares, which width x height may be a fraction of (JPEG's DCT scaling). */
typedef struct thumb_image {
  uint32_t source_width;
  uint32_t source_height;
  uint32_t width;
  uint32_t height;
  uint32_t channels;
  uint8_t* pixels;
} thumb_image;

/* What a decoder may decode, checked on the image's declared size before any pixel buffer
 * exists; 0 is no limit. target_* is the box the thumbnail must fit (a JPEG decoder may
 * decode at 1/2, 1/4 or 1/8 scale as long as the result still covers it). */
typedef struct thumb_decode_limits {
  uint64_t max_pixels;
  uint32_t max_width;
  uint32_t max_height;
  uint32_t target_width;
  uint32_t target_height;
  /* Called now and then while decoding (may be NULL): a heartbeat, and non-zero when the task
   * was cancelled, which ends the decode with an error. */
  int (*poll)(void* ctx);
  void* poll_ctx;
} thumb_decode_limits;

/* How a decode or encode ended. */
typedef enum thumb_status {
  THUMB_OK = 0,
  THUMB_LIMIT,   /* refused by a limit (pixels, dimensions, memory): SP_LIMIT */
  THUMB_INVALID, /* not an image we read, or a malformed one: SP_FAIL */
} thumb_status;

/* The message of a failed step, NUL-terminated. */
typedef struct thumb_error {
  char text[256];
} thumb_error;

/* Sets err's text (printf-style) and returns `status`. */
thumb_status thumb_fail(thumb_error* err, thumb_status status, const char* fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Checks a declared size against the limits; THUMB_OK, or THUMB_LIMIT naming the limit. */
thumb_status thumb_check_size(const thumb_decode_limits* limits, uint64_t width, uint64_t height,
                              const char* format, thumb_error* err);

/* Allocates image->pixels for width x height x channels; THUMB_OK, or THUMB_LIMIT when the
 * worker cannot allocate it (its memory limit). */
thumb_status thumb_image_alloc(thumb_image* image, uint32_t width, uint32_t height,
                               uint32_t channels, thumb_error* err);

#endif /* SANDPOOL_THUMBNAIL_IMAGE_H */
