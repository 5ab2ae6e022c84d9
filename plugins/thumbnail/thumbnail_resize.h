/* The thumbnail's size and the downscaler: an area average (each output pixel is the mean of
 * the input area it covers, partial pixels weighted by how much of them it covers), with
 * alpha premultiplied while averaging so transparent pixels lend no colour. */
#ifndef SANDPOOL_THUMBNAIL_RESIZE_H
#define SANDPOOL_THUMBNAIL_RESIZE_H

#include <stdint.h>

#include "thumbnail_image.h"

/* The size of a width x height image scaled to fit inside box_width x box_height, keeping
 * its aspect ratio (rounded to the nearest pixel, at least 1), never enlarged. A box side of
 * 0 leaves that side free. */
void thumb_fit(uint32_t width, uint32_t height, uint32_t box_width, uint32_t box_height,
               uint32_t* out_width, uint32_t* out_height);

/* Resizes `in` to out_width x out_height (each at most in's) into *out, same channels.
 * `poll` (may be NULL) is called every few rows; non-zero stops with an error.
 * THUMB_OK, or THUMB_LIMIT when out of memory, or THUMB_INVALID when stopped. */
thumb_status thumb_resize(const thumb_image* in, uint32_t out_width, uint32_t out_height,
                          int (*poll)(void*), void* poll_ctx, thumb_image* out, thumb_error* err);

#endif /* SANDPOOL_THUMBNAIL_RESIZE_H */
