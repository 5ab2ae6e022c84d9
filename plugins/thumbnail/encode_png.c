/* PNG output through libpng, into memory. Errors longjmp back into encode(), which keeps
 * nothing in local variables across the jump (state lives in *ctx, owned by the caller). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "thumbnail_codecs.h"

typedef struct png_out {
  png_structp png;
  png_infop info;
  thumb_buffer* buffer;
  char message[200];
} png_out;

static void on_error(png_structp png, png_const_charp msg) {
  png_out* c = (png_out*)png_get_error_ptr(png);
  snprintf(c->message, sizeof c->message, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static void on_write(png_structp png, png_bytep data, size_t n) {
  png_out* c = (png_out*)png_get_io_ptr(png);
  const int rc = thumb_buffer_append(c->buffer, data, n);
  if (rc != 0) {
    char why[120];
    thumb_buffer_refusal(c->buffer, rc, why, sizeof why);
    png_error(png, why); /* on_error copies it before jumping */
  }
}

static void on_flush(png_structp png) { (void)png; }

static thumb_status encode(png_out* c, const thumb_image* image, thumb_error* err) {
  uint32_t y;
  if (setjmp(png_jmpbuf(c->png)) != 0) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: png output: %s", c->message);
  }
  png_set_write_fn(c->png, c, on_write, on_flush);
  png_set_compression_level(c->png, 6);
  png_set_IHDR(c->png, c->info, image->width, image->height, 8,
               image->channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(c->png, c->info);
  for (y = 0; y < image->height; ++y) {
    png_write_row(c->png, image->pixels + (size_t)y * image->width * image->channels);
  }
  png_write_end(c->png, NULL);
  return THUMB_OK;
}

thumb_status thumb_encode_png(const thumb_image* image, thumb_buffer* out, thumb_error* err) {
  png_out* c = (png_out*)calloc(1, sizeof *c);
  thumb_status status;
  if (c == NULL) return thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory");
  c->buffer = out;
  c->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, c, on_error, on_warning);
  if (c->png != NULL) c->info = png_create_info_struct(c->png);
  if (c->info == NULL) {
    status = thumb_fail(err, THUMB_LIMIT, "thumbnail: png output: out of memory");
  } else {
    status = encode(c, image, err);
  }
  png_destroy_write_struct(c->png != NULL ? &c->png : NULL, c->info != NULL ? &c->info : NULL);
  free(c);
  if (status != THUMB_OK) {
    free(out->data);
    memset(out, 0, sizeof *out);
  }
  return status;
}
