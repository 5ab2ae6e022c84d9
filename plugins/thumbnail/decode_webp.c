/* WebP through libwebp's advanced decoding API, into a buffer of ours, one thread
 * (options.use_threads stays 0: the strict sandbox has no clone). No longjmp here: libwebp
 * answers with a status code. */
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "thumbnail_codecs.h"

static const char* status_text(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error (malformed data)";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "the file ends early (truncated)";
    case VP8_STATUS_OK:
      break;
  }
  return "ok";
}

thumb_status thumb_decode_webp(const uint8_t* data, size_t len, const thumb_decode_limits* limits,
                               thumb_image* out, thumb_error* err) {
  WebPDecoderConfig config;
  VP8StatusCode s;
  thumb_status status;
  memset(out, 0, sizeof *out);
  if (!WebPInitDecoderConfig(&config)) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: webp: libwebp's ABI does not match");
  }
  s = WebPGetFeatures(data, len, &config.input);
  if (s != VP8_STATUS_OK) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: webp: %s", status_text(s));
  }
  if (config.input.has_animation) {
    return thumb_fail(err, THUMB_INVALID, "thumbnail: webp: animated WebP is not supported");
  }
  status = thumb_check_size(limits, (uint64_t)config.input.width, (uint64_t)config.input.height,
                            "webp", err);
  if (status != THUMB_OK) return status;
  status = thumb_image_alloc(out, (uint32_t)config.input.width, (uint32_t)config.input.height,
                             config.input.has_alpha ? 4 : 3, err);
  if (status != THUMB_OK) return status;
  out->source_width = out->width;
  out->source_height = out->height;
  config.output.colorspace = config.input.has_alpha ? MODE_RGBA : MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out->pixels;
  config.output.u.RGBA.stride = (int)(out->width * out->channels);
  config.output.u.RGBA.size = (size_t)out->width * out->height * out->channels;
  s = WebPDecode(data, len, &config);
  WebPFreeDecBuffer(&config.output);
  if (s != VP8_STATUS_OK) {
    free(out->pixels);
    out->pixels = NULL;
    return thumb_fail(err, THUMB_INVALID, "thumbnail: webp: %s", status_text(s));
  }
  return THUMB_OK;
}
