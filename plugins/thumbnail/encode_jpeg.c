/* JPEG output through libjpeg-turbo, into memory through a destination manager of ours (so
 * a failure mid-way leaks nothing, unlike jpeg_mem_dest's). Errors longjmp back into
 * encode(), which keeps nothing in local variables across the jump. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "thumbnail_codecs.h"

typedef struct jpeg_out {
  struct jpeg_error_mgr err; /* first: libjpeg hands the error callback &err */
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  struct jpeg_compress_struct cinfo;
  struct jpeg_destination_mgr dest;
  uint8_t chunk[16384]; /* libjpeg writes here; each full chunk goes to *buffer */
  thumb_buffer* buffer;
  uint8_t* row; /* one RGB row, for an RGBA image composited over white */
  int created;
} jpeg_out;

static void on_error(j_common_ptr cinfo) {
  jpeg_out* c = (jpeg_out*)cinfo->err;
  (*cinfo->err->format_message)(cinfo, c->message);
  longjmp(c->jump, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
  (void)cinfo;
  (void)level;
}

static jpeg_out* out_of(j_compress_ptr cinfo) { return (jpeg_out*)cinfo->client_data; }

static void init_destination(j_compress_ptr cinfo) {
  jpeg_out* c = out_of(cinfo);
  c->dest.next_output_byte = c->chunk;
  c->dest.free_in_buffer = sizeof c->chunk;
}

static void spill(jpeg_out* c, size_t n) {
  const int rc = thumb_buffer_append(c->buffer, c->chunk, n);
  if (rc != 0) {
    thumb_buffer_refusal(c->buffer, rc, c->message, sizeof c->message);
    longjmp(c->jump, 1);
  }
}

static boolean empty_output_buffer(j_compress_ptr cinfo) {
  jpeg_out* c = out_of(cinfo);
  spill(c, sizeof c->chunk);
  init_destination(cinfo);
  return TRUE;
}

static void term_destination(j_compress_ptr cinfo) {
  jpeg_out* c = out_of(cinfo);
  spill(c, sizeof c->chunk - c->dest.free_in_buffer);
}

/* Row y as RGB: an RGBA row composited over white, an RGB row as it is. */
static JSAMPROW rgb_row(jpeg_out* c, const thumb_image* image, uint32_t y) {
  const uint8_t* src = image->pixels + (size_t)y * image->width * image->channels;
  uint32_t x, k;
  if (image->channels == 3) return (JSAMPROW)src;
  for (x = 0; x < image->width; ++x, src += 4) {
    for (k = 0; k < 3; ++k) {
      c->row[3 * x + k] = (uint8_t)((src[k] * src[3] + 255 * (255 - src[3]) + 127) / 255);
    }
  }
  return c->row;
}

static thumb_status encode(jpeg_out* c, const thumb_image* image, int quality, thumb_error* err) {
  if (setjmp(c->jump) != 0) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: jpeg output: %s", c->message);
  }
  jpeg_create_compress(&c->cinfo);
  c->created = 1;
  c->cinfo.client_data = c;
  c->dest.init_destination = init_destination;
  c->dest.empty_output_buffer = empty_output_buffer;
  c->dest.term_destination = term_destination;
  c->cinfo.dest = &c->dest;
  c->cinfo.image_width = image->width;
  c->cinfo.image_height = image->height;
  c->cinfo.input_components = 3;
  c->cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c->cinfo);
  jpeg_set_quality(&c->cinfo, quality, TRUE);
  jpeg_start_compress(&c->cinfo, TRUE);
  while (c->cinfo.next_scanline < c->cinfo.image_height) {
    JSAMPROW row = rgb_row(c, image, c->cinfo.next_scanline);
    jpeg_write_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_compress(&c->cinfo);
  return THUMB_OK;
}

thumb_status thumb_encode_jpeg(const thumb_image* image, int quality, thumb_buffer* out,
                               thumb_error* err) {
  jpeg_out* c = (jpeg_out*)calloc(1, sizeof *c);
  thumb_status status;
  if (c == NULL) return thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory");
  c->buffer = out;
  c->row = (uint8_t*)malloc((size_t)image->width * 3);
  if (c->row == NULL) {
    free(c);
    return thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory");
  }
  c->cinfo.err = jpeg_std_error(&c->err);
  c->err.error_exit = on_error;
  c->err.emit_message = on_message;
  status = encode(c, image, quality, err);
  if (c->created) jpeg_destroy_compress(&c->cinfo);
  free(c->row);
  free(c);
  if (status != THUMB_OK) {
    free(out->data);
    memset(out, 0, sizeof *out);
  }
  return status;
}
