/* thumbnail: decodes a JPEG, PNG or WebP image (libjpeg-turbo, libpng, libwebp) and answers
 * a smaller PNG or JPEG of it, area-averaged, its aspect ratio kept. The payload is options
 * text, a NUL, then the image. The file's declared size is checked against max_pixels,
 * max_width and max_height before anything is decoded; a refused image is SP_LIMIT, a
 * malformed one SP_FAIL. docs/plugin-guide.md, "thumbnail", is the user's side of this. */
#include <sandpool/plugin.h>

#include <stdlib.h>
#include <string.h>

#include "common/result_bound.h"
#include "thumbnail_codecs.h"
#include "thumbnail_config.h"
#include "thumbnail_request.h"
#include "thumbnail_resize.h"

static const char* const kTypes[] = {"thumbnail", NULL};

typedef struct thumbnail_plugin {
  const sp_host_api* host;
  thumbnail_plugin_config config;
} thumbnail_plugin;

/* One task's call, for the decoders' and the resizer's poll. */
typedef struct thumbnail_call {
  const thumbnail_plugin* plugin;
  sp_call* call;
} thumbnail_call;

static int poll_call(void* ctx) {
  const thumbnail_call* c = (const thumbnail_call*)ctx;
  c->plugin->host->heartbeat(c->call);
  return c->plugin->host->cancelled(c->call);
}

static int fail(const thumbnail_call* c, int code, const char* msg) {
  c->plugin->host->set_error(c->call, msg, strlen(msg));
  return code;
}

static int answer(const thumbnail_call* c, thumb_status status, const thumb_error* err) {
  return fail(c, status == THUMB_LIMIT ? SP_LIMIT : SP_FAIL, err->text);
}

static thumb_status decode(const thumbnail_request* q, const thumb_decode_limits* limits,
                           thumb_image* image, thumb_error* err) {
  if (q->image_len == 0) return thumb_fail(err, THUMB_INVALID, "thumbnail: the image is empty");
  switch (thumb_sniff(q->image, q->image_len)) {
    case THUMB_JPEG:
      return thumb_decode_jpeg(q->image, q->image_len, limits, image, err);
    case THUMB_PNG:
      return thumb_decode_png(q->image, q->image_len, limits, image, err);
    case THUMB_WEBP:
      return thumb_decode_webp(q->image, q->image_len, limits, image, err);
    case THUMB_UNKNOWN:
      break;
  }
  return thumb_fail(err, THUMB_INVALID,
                    "thumbnail: not a JPEG, PNG or WebP image (its first bytes are none of "
                    "their signatures)");
}

/* The decoded image scaled to the request's box (when it is not that size already). */
static thumb_status scale(const thumbnail_call* c, const thumbnail_request* q, thumb_image* image,
                          thumb_error* err) {
  uint32_t w, h;
  thumb_image small;
  thumb_status status;
  thumb_fit(image->source_width, image->source_height, q->width, q->height, &w, &h);
  /* A JPEG decoder picked a scale that covers w x h; should it ever not, no enlarging. */
  if (w > image->width) w = image->width;
  if (h > image->height) h = image->height;
  if (w == image->width && h == image->height) return THUMB_OK;
  status = thumb_resize(image, w, h, poll_call, (void*)c, &small, err);
  if (status != THUMB_OK) return status;
  free(image->pixels);
  *image = small;
  return THUMB_OK;
}

static int thumbnail(const thumbnail_call* c, const thumbnail_request* q, uint64_t max_result) {
  const thumbnail_plugin_config* k = &c->plugin->config;
  thumb_decode_limits limits;
  thumb_image image;
  thumb_buffer out;
  thumb_error err;
  thumb_status status;
  int rc = SP_OK;
  memset(&out, 0, sizeof out);
  out.max = max_result > SIZE_MAX ? SIZE_MAX : (size_t)max_result;
  limits.max_pixels = k->max_pixels;
  limits.max_width = k->max_width;
  limits.max_height = k->max_height;
  limits.target_width = q->width;
  limits.target_height = q->height;
  limits.poll = poll_call;
  limits.poll_ctx = (void*)c;
  status = decode(q, &limits, &image, &err);
  if (status != THUMB_OK) return answer(c, status, &err);
  status = scale(c, q, &image, &err);
  if (status == THUMB_OK) {
    status = q->format == THUMB_OUT_JPEG ? thumb_encode_jpeg(&image, q->quality, &out, &err)
                                         : thumb_encode_png(&image, &out, &err);
  }
  free(image.pixels);
  if (status != THUMB_OK) return answer(c, status, &err);
  if (c->plugin->host->write_result(c->call, out.data, out.len) != 0) {
    rc = SP_FAIL; /* the host named it: the result exceeds max_result */
  }
  free(out.data);
  return rc;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  char err[512];
  thumbnail_plugin* s;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (thumbnail_plugin*)calloc(1, sizeof *s);
  if (s == NULL) return 2;
  s->host = host;
  if (thumbnail_plugin_config_parse(config_json, config_len, &s->config, err, sizeof err) != 0) {
    host->log(NULL, 3, err, strlen(err));
    free(s);
    return 3;
  }
  *state = s;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  thumbnail_call c;
  thumbnail_request q;
  char err[512];
  c.plugin = (const thumbnail_plugin*)state;
  c.call = call;
  if (thumbnail_request_parse(task->payload, task->payload_len, &c.plugin->config, &q, err,
                              sizeof err) != 0) {
    return fail(&c, SP_FAIL, err);
  }
  return thumbnail(&c, &q, sp_task_max_result(task));
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }
