/* Images for the thumbnail plugin's tests, made and read in the test itself through the same
 * Debian libraries the plugin uses (libjpeg-turbo, libpng, libwebp), in C so that libjpeg's
 * setjmp/longjmp error recovery crosses no destructor. Every function returns 0 on success,
 * -1 on failure; the caller frees what it got (free()). */
#ifndef SANDPOOL_TEST_IMAGE_SAMPLES_H
#define SANDPOOL_TEST_IMAGE_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sample_image {
  uint32_t width;
  uint32_t height;
  uint32_t channels; /* 3 RGB, 4 RGBA */
  uint8_t* pixels;   /* rows of width * channels bytes */
} sample_image;

/* A gradient: red grows left to right, green top to bottom, blue is 64; with 4 channels,
 * alpha is 255 on the left half and 0 on the right half. */
int sample_gradient(uint32_t width, uint32_t height, uint32_t channels, sample_image* out);

/* Encoders: RGB only for JPEG; RGB or RGBA for PNG and WebP (lossless or lossy). */
int sample_encode_jpeg(const sample_image* image, int quality, int progressive, uint8_t** data,
                       size_t* len);
int sample_encode_png(const sample_image* image, uint8_t** data, size_t* len);
int sample_encode_webp(const sample_image* image, int lossless, uint8_t** data, size_t* len);

/* The 3-channel `image` as a PNG of another kind, through libpng's full write API: color_type
 * PNG_COLOR_TYPE_GRAY (the green channel), PNG_COLOR_TYPE_PALETTE (a gray ramp of 256 entries
 * indexed by green) or PNG_COLOR_TYPE_RGB; bit_depth 8 or 16 (not for a palette); interlace
 * PNG_INTERLACE_NONE or PNG_INTERLACE_ADAM7. */
int sample_encode_png_as(const sample_image* image, int color_type, int bit_depth, int interlace,
                         uint8_t** data, size_t* len);

/* A PNG of width x height black RGB pixels: a few hundred bytes per megapixel, the
 * decompression bomb. */
int sample_png_bomb(uint32_t width, uint32_t height, uint8_t** data, size_t* len);

/* Decodes a PNG or JPEG (the plugin's outputs) to 8-bit RGB or RGBA. */
int sample_decode(const uint8_t* data, size_t len, sample_image* out);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_TEST_IMAGE_SAMPLES_H */
