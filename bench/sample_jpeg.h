/* The thumbnail benchmark's input: a photo-like JPEG made with libjpeg-turbo. */
#ifndef SANDPOOL_BENCH_SAMPLE_JPEG_H
#define SANDPOOL_BENCH_SAMPLE_JPEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A width x height JPEG of `quality`: gradients, waves and noise (fixed seed), so it
 * compresses like a photograph rather than a flat gradient. Returns 0 and a malloc'd
 * *data of *len bytes (free() it), or -1. */
int bench_sample_jpeg(uint32_t width, uint32_t height, int quality, uint8_t** data, size_t* len);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_BENCH_SAMPLE_JPEG_H */
