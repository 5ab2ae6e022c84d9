/* JPEG through libjpeg-turbo. libjpeg reports a fatal error by calling error_exit, which
 * must not return: ours longjmps back into decode(), which keeps nothing in local variables
 * across the jump (all state lives in *ctx and *out, owned by the caller). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jpeglib.h needs size_t and FILE declared first. */
#include <jpeglib.h>

#include "thumbnail_codecs.h"
#include "thumbnail_resize.h"

/* More scans than this is a progressive JPEG built to burn CPU (each scan is a pass over the
 * whole image); real encoders write at most a few dozen. */
#define JPEG_MAX_SCANS 100

typedef struct jpeg_guard {
  struct jpeg_error_mgr base; /* first: libjpeg hands the callbacks &base */
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  char warning[JMSG_LENGTH_MAX]; /* the first warning: corrupt or truncated data */
  const thumb_decode_limits* limits;
} jpeg_guard;

typedef struct jpeg_ctx {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_progress_mgr progress;
  jpeg_guard guard;
  int created;
} jpeg_ctx;

static void on_error(j_common_ptr cinfo) {
  jpeg_guard* g = (jpeg_guard*)cinfo->err;
  (*cinfo->err->format_message)(cinfo, g->message);
  longjmp(g->jump, 1);
}

/* Level -1 is a warning (libjpeg goes on with gray or repeated blocks): kept, and counted as
 * libjpeg's own emit_message does. Trace messages (level >= 0) are dropped. */
static void on_message(j_common_ptr cinfo, int level) {
  jpeg_guard* g = (jpeg_guard*)cinfo->err;
  if (level >= 0) return;
  if (cinfo->err->num_warnings++ == 0) (*cinfo->err->format_message)(cinfo, g->warning);
}

/* Called as libjpeg works through rows and scans: the scan count, the heartbeat and
 * cancellation. */
static void on_progress(j_common_ptr cinfo) {
  jpeg_guard* g = (jpeg_guard*)cinfo->err;
  const struct jpeg_decompress_struct* d = (const struct jpeg_decompress_struct*)cinfo;
  if (d->input_scan_number > JPEG_MAX_SCANS) {
    snprintf(g->message, sizeof g->message, "more than %d scans", JPEG_MAX_SCANS);
    longjmp(g->jump, 1);
  }
  if (g->limits->poll != NULL && g->limits->poll(g->limits->poll_ctx)) {
    snprintf(g->message, sizeof g->message, "cancelled");
    longjmp(g->jump, 1);
  }
}

/* The largest DCT scale denominator (8, 4, 2, 1) at which the decoded image still covers
 * the thumbnail, so the average has at least a pixel for each of its pixels. */
static unsigned scale_denominator(const struct jpeg_decompress_struct* cinfo,
                                  const thumb_decode_limits* limits) {
  uint32_t tw, th;
  unsigned denom = 8;
  thumb_fit(cinfo->image_width, cinfo->image_height, limits->target_width, limits->target_height,
            &tw, &th);
  while (denom > 1 && ((cinfo->image_width + denom - 1) / denom < tw ||
                       (cinfo->image_height + denom - 1) / denom < th)) {
    denom /= 2;
  }
  return denom;
}

static thumb_status decode(jpeg_ctx* c, const uint8_t* data, size_t len,
                           const thumb_decode_limits* limits, thumb_image* out, thumb_error* err) {
  thumb_status status;
  if (setjmp(c->guard.jump) != 0) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: jpeg: %s", c->guard.message);
  }
  jpeg_create_decompress(&c->cinfo);
  c->created = 1;
  c->progress.progress_monitor = on_progress;
  c->cinfo.progress = &c->progress;
  jpeg_mem_src(&c->cinfo, data, (unsigned long)len);
  jpeg_read_header(&c->cinfo, TRUE);
  status = thumb_check_size(limits, c->cinfo.image_width, c->cinfo.image_height, "jpeg", err);
  if (status != THUMB_OK) return status;
  c->cinfo.out_color_space = JCS_RGB; /* gray is widened; CMYK is refused by libjpeg */
  c->cinfo.scale_num = 1;
  c->cinfo.scale_denom = scale_denominator(&c->cinfo, limits);
  jpeg_start_decompress(&c->cinfo);
  status = thumb_image_alloc(out, c->cinfo.output_width, c->cinfo.output_height, 3, err);
  if (status != THUMB_OK) return status;
  out->source_width = c->cinfo.image_width;
  out->source_height = c->cinfo.image_height;
  while (c->cinfo.output_scanline < c->cinfo.output_height) {
    JSAMPROW row = out->pixels + (size_t)c->cinfo.output_scanline * out->width * 3;
    jpeg_read_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&c->cinfo);
  if (c->guard.base.num_warnings > 0) {
    /* A partial or garbled picture is not a thumbnail of the file. */
    return thumb_fail(err, THUMB_INVALID, "thumbnail: jpeg: %s", c->guard.warning);
  }
  return THUMB_OK;
}

thumb_status thumb_decode_jpeg(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                               thumb_image* out, thumb_error* err) {
  jpeg_ctx* c = (jpeg_ctx*)calloc(1, sizeof *c);
  thumb_status status;
  memset(out, 0, sizeof *out);
  if (c == NULL) return thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory");
  c->cinfo.err = jpeg_std_error(&c->guard.base);
  c->guard.base.error_exit = on_error;
  c->guard.base.emit_message = on_message;
  c->guard.limits = limits;
  status = decode(c, data, len, limits, out, err);
  if (c->created) jpeg_destroy_decompress(&c->cinfo);
  free(c);
  if (status != THUMB_OK) {
    free(out->pixels);
    out->pixels = NULL;
  }
  return status;
}
