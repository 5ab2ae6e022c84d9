/* PNG through libpng. libpng reports a fatal error through our error function, which must
 * not return: it longjmps to png_jmpbuf, set in decode(), which keeps nothing in local
 * variables across the jump (all state lives in *ctx and *out, owned by the caller). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "thumbnail_codecs.h"

typedef struct png_ctx {
  png_structp png;
  png_infop info;
  const uint8_t* data;
  size_t len;
  size_t at;
  png_bytep* rows;
  const thumb_decode_limits* limits;
  char message[200];
} png_ctx;

static void on_error(png_structp png, png_const_charp msg) {
  png_ctx* c = (png_ctx*)png_get_error_ptr(png);
  snprintf(c->message, sizeof c->message, "%s", msg);
  png_longjmp(png, 1);
}

/* Warnings (a bad CRC on an ancillary chunk, which libpng skips) leave the image intact. */
static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static void on_read(png_structp png, png_bytep out, size_t n) {
  png_ctx* c = (png_ctx*)png_get_io_ptr(png);
  if (n > c->len - c->at) png_error(png, "the file ends early (truncated)");
  memcpy(out, c->data + c->at, n);
  c->at += n;
}

/* After each row: the heartbeat and cancellation, every 64 rows. */
static void on_row(png_structp png, png_uint_32 row, int pass) {
  png_ctx* c = (png_ctx*)png_get_io_ptr(png);
  (void)pass;
  if (row % 64 == 0 && c->limits->poll != NULL && c->limits->poll(c->limits->poll_ctx)) {
    png_error(png, "cancelled");
  }
}

/* Every PNG as 8-bit RGB or RGBA: palettes and low bit depths expanded, tRNS made alpha,
 * 16 bits scaled down, gray widened, interlacing undone. Returns the channel count. */
static int set_transforms(png_ctx* c) {
  const int type = png_get_color_type(c->png, c->info);
  const int depth = png_get_bit_depth(c->png, c->info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(c->png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(c->png);
  if (png_get_valid(c->png, c->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(c->png);
  if (depth == 16) png_set_scale_16(c->png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_gray_to_rgb(c->png);
  }
  png_set_interlace_handling(c->png);
  png_read_update_info(c->png, c->info);
  return png_get_channels(c->png, c->info);
}

static thumb_status decode(png_ctx* c, const thumb_decode_limits* limits, thumb_image* out,
                           thumb_error* err) {
  thumb_status status;
  png_uint_32 y;
  if (setjmp(png_jmpbuf(c->png)) != 0) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: png: %s", c->message);
  }
  png_set_read_fn(c->png, c, on_read);
  png_set_read_status_fn(c->png, on_row);
  png_read_info(c->png, c->info);
  status = thumb_check_size(limits, png_get_image_width(c->png, c->info),
                            png_get_image_height(c->png, c->info), "png", err);
  if (status != THUMB_OK) return status;
  status =
      thumb_image_alloc(out, png_get_image_width(c->png, c->info),
                        png_get_image_height(c->png, c->info), (uint32_t)set_transforms(c), err);
  if (status != THUMB_OK) return status;
  out->source_width = out->width;
  out->source_height = out->height;
  if (png_get_rowbytes(c->png, c->info) != (size_t)out->width * out->channels) {
    png_error(c->png, "unexpected row size after the transforms");
  }
  c->rows = (png_bytep*)malloc(sizeof(png_bytep) * out->height);
  if (c->rows == NULL) return thumb_fail(err, THUMB_LIMIT, "thumbnail: png: out of memory");
  for (y = 0; y < out->height; ++y)
    c->rows[y] = out->pixels + (size_t)y * out->width * out->channels;
  png_read_image(c->png, c->rows);
  png_read_end(c->png, NULL); /* the chunks after the image, to IEND, CRCs checked */
  return THUMB_OK;
}

thumb_status thumb_decode_png(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                              thumb_image* out, thumb_error* err) {
  png_ctx* c = (png_ctx*)calloc(1, sizeof *c);
  thumb_status status;
  memset(out, 0, sizeof *out);
  if (c == NULL) return thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory");
  c->data = data;
  c->len = len;
  c->limits = limits;
  c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, on_error, on_warning);
  if (c->png != NULL) c->info = png_create_info_struct(c->png);
  if (c->info == NULL) {
    status = thumb_fail(err, THUMB_LIMIT, "thumbnail: png: out of memory");
  } else {
    status = decode(c, limits, out, err);
  }
  png_destroy_read_struct(c->png != NULL ? &c->png : NULL, c->info != NULL ? &c->info : NULL, NULL);
  free(c->rows);
  free(c);
  if (status != THUMB_OK) {
    free(out->pixels);
    out->pixels = NULL;
  }
  return status;
}
