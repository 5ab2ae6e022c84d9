#include "thumbnail_resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void thumb_fit(uint32_t width, uint32_t height, uint32_t box_width, uint32_t box_height,
               uint32_t* out_width, uint32_t* out_height) {
  const uint64_t w = width, h = height;
  const uint64_t bw = box_width == 0 || box_width > width ? width : box_width;
  const uint64_t bh = box_height == 0 || box_height > height ? height : box_height;
  if (bw * h <= bh * w) { /* the width binds: bw / w is the smaller scale */
    *out_width = (uint32_t)bw;
    *out_height = (uint32_t)((2 * h * bw + w) / (2 * w));
  } else {
    *out_height = (uint32_t)bh;
    *out_width = (uint32_t)((2 * w * bh + h) / (2 * h));
  }
  if (*out_width == 0) *out_width = 1;
  if (*out_height == 0) *out_height = 1;
}

/* One axis of the average: output pixel o takes input pixels first[o] .. first[o]+count[o]-1
 * with weights[o * span ...], which sum to 1. */
typedef struct axis_weights {
  uint32_t* first;
  uint32_t* count;
  float* weights;
  uint32_t span; /* the most input pixels one output pixel covers */
} axis_weights;

static void axis_free(axis_weights* a) {
  free(a->first);
  free(a->count);
  free(a->weights);
}

/* Output pixel o covers [o * scale, (o + 1) * scale) of the input; each input pixel i in it
 * weighs the length of [i, i + 1) inside that interval. 0, or -1 when out of memory. */
static int axis_init(axis_weights* a, uint32_t in, uint32_t out) {
  const double scale = (double)in / out;
  uint32_t o;
  a->span = (uint32_t)ceil(scale) + 1;
  a->first = (uint32_t*)malloc(sizeof(uint32_t) * out);
  a->count = (uint32_t*)malloc(sizeof(uint32_t) * out);
  a->weights = (float*)calloc((size_t)out * a->span, sizeof(float));
  if (a->first == NULL || a->count == NULL || a->weights == NULL) return -1;
  for (o = 0; o < out; ++o) {
    const double lo = o * scale;
    const double hi = o + 1 == out ? (double)in : (o + 1) * scale;
    uint32_t i = (uint32_t)floor(lo);
    uint32_t n = 0;
    double sum = 0;
    a->first[o] = i;
    for (; i < in && (double)i < hi && n < a->span; ++i, ++n) {
      const double cover = fmin(i + 1.0, hi) - fmax((double)i, lo);
      a->weights[(size_t)o * a->span + n] = (float)(cover > 0 ? cover : 0);
      sum += cover > 0 ? cover : 0;
    }
    a->count[o] = n;
    for (i = 0; i < n; ++i) a->weights[(size_t)o * a->span + i] /= (float)sum;
  }
  return 0;
}

/* Row y of `in` averaged across to the output's width: floats, alpha premultiplied. */
static void average_row(const thumb_image* in, uint32_t y, const axis_weights* ax,
                        uint32_t out_width, float* row) {
  const uint32_t ch = in->channels;
  const uint8_t* src = in->pixels + (size_t)y * in->width * ch;
  uint32_t o, k;
  for (o = 0; o < out_width; ++o) {
    const float* w = ax->weights + (size_t)o * ax->span;
    const uint8_t* p = src + (size_t)ax->first[o] * ch;
    float acc[4] = {0, 0, 0, 0};
    for (k = 0; k < ax->count[o]; ++k, p += ch) {
      if (ch == 4) {
        const float a = w[k] * p[3];
        acc[0] += a * p[0];
        acc[1] += a * p[1];
        acc[2] += a * p[2];
        acc[3] += a;
      } else {
        acc[0] += w[k] * p[0];
        acc[1] += w[k] * p[1];
        acc[2] += w[k] * p[2];
      }
    }
    memcpy(row + (size_t)o * ch, acc, sizeof(float) * ch);
  }
}

static uint8_t to_byte(float v) {
  if (v <= 0) return 0;
  if (v >= 255) return 255;
  return (uint8_t)(v + 0.5f);
}

/* The averaged floats of one output row as bytes, alpha divided back out. */
static void store_row(const float* acc, uint32_t width, uint32_t ch, uint8_t* dst) {
  uint32_t o;
  for (o = 0; o < width; ++o, acc += ch, dst += ch) {
    if (ch == 4) {
      const float a = acc[3];
      dst[0] = a > 0 ? to_byte(acc[0] / a) : 0;
      dst[1] = a > 0 ? to_byte(acc[1] / a) : 0;
      dst[2] = a > 0 ? to_byte(acc[2] / a) : 0;
      dst[3] = to_byte(a);
    } else {
      dst[0] = to_byte(acc[0]);
      dst[1] = to_byte(acc[1]);
      dst[2] = to_byte(acc[2]);
    }
  }
}

/* The two passes: across each input row (cached, as neighbouring output rows share their
 * boundary row), then down into the output row. 0, or -1 when `poll` asked to stop. */
static int average(const thumb_image* in, const axis_weights* ax, const axis_weights* ay,
                   int (*poll)(void*), void* poll_ctx, float* row, float* acc, thumb_image* out) {
  const size_t n = (size_t)out->width * in->channels;
  uint32_t oy, k;
  uint32_t cached = UINT32_MAX;
  for (oy = 0; oy < out->height; ++oy) {
    const float* wy = ay->weights + (size_t)oy * ay->span;
    size_t j;
    if (poll != NULL && oy % 64 == 0 && poll(poll_ctx)) return -1;
    memset(acc, 0, sizeof(float) * n);
    for (k = 0; k < ay->count[oy]; ++k) {
      const uint32_t y = ay->first[oy] + k;
      if (y != cached) {
        average_row(in, y, ax, out->width, row);
        cached = y;
      }
      for (j = 0; j < n; ++j) acc[j] += wy[k] * row[j];
    }
    store_row(acc, out->width, in->channels, out->pixels + (size_t)oy * n);
  }
  return 0;
}

thumb_status thumb_resize(const thumb_image* in, uint32_t out_width, uint32_t out_height,
                          int (*poll)(void*), void* poll_ctx, thumb_image* out, thumb_error* err) {
  axis_weights ax, ay;
  float* row;
  float* acc;
  thumb_status status = THUMB_OK;
  memset(&ax, 0, sizeof ax);
  memset(&ay, 0, sizeof ay);
  if (thumb_image_alloc(out, out_width, out_height, in->channels, err) != THUMB_OK) {
    return THUMB_LIMIT;
  }
  out->source_width = in->source_width;
  out->source_height = in->source_height;
  row = (float*)malloc(sizeof(float) * out_width * in->channels);
  acc = (float*)malloc(sizeof(float) * out_width * in->channels);
  if (row == NULL || acc == NULL || axis_init(&ax, in->width, out_width) != 0 ||
      axis_init(&ay, in->height, out_height) != 0) {
    status = thumb_fail(err, THUMB_LIMIT, "thumbnail: out of memory while resizing");
  } else if (average(in, &ax, &ay, poll, poll_ctx, row, acc, out) != 0) {
    status = thumb_fail(err, THUMB_INVALID, "cancelled");
  }
  free(row);
  free(acc);
  axis_free(&ax);
  axis_free(&ay);
  if (status != THUMB_OK) {
    free(out->pixels);
    out->pixels = NULL;
  }
  return status;
}
