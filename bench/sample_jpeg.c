#include "sample_jpeg.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

typedef struct bench_jpeg {
  struct jpeg_error_mgr err; /* first: libjpeg hands error_exit &err */
  jmp_buf jump;
  struct jpeg_compress_struct cinfo;
  unsigned char* out;
  unsigned long out_len;
  uint8_t* row;
  uint32_t seed; /* the noise; here, not on encode()'s stack, which longjmp may clobber */
} bench_jpeg;

static void on_error(j_common_ptr cinfo) { longjmp(((bench_jpeg*)cinfo->err)->jump, 1); }

static void fill_row(uint8_t* row, uint32_t width, uint32_t height, uint32_t y, uint32_t* seed) {
  uint32_t x, k;
  for (x = 0; x < width; ++x) {
    const double wave = 40 * sin(x * 0.05) * cos(y * 0.07);
    for (k = 0; k < 3; ++k) {
      const double base = k == 0 ? 255.0 * x / width : k == 1 ? 255.0 * y / height : 128;
      double v;
      *seed = *seed * 1664525u + 1013904223u;
      v = base + wave + (double)((*seed >> 24) % 33) - 16;
      row[3 * x + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

static int encode(bench_jpeg* c, uint32_t width, uint32_t height, int quality) {
  c->seed = 18;
  if (setjmp(c->jump) != 0) return -1;
  jpeg_create_compress(&c->cinfo);
  jpeg_mem_dest(&c->cinfo, &c->out, &c->out_len);
  c->cinfo.image_width = width;
  c->cinfo.image_height = height;
  c->cinfo.input_components = 3;
  c->cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c->cinfo);
  jpeg_set_quality(&c->cinfo, quality, TRUE);
  jpeg_start_compress(&c->cinfo, TRUE);
  while (c->cinfo.next_scanline < height) {
    JSAMPROW row = c->row;
    fill_row(c->row, width, height, c->cinfo.next_scanline, &c->seed);
    jpeg_write_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_compress(&c->cinfo);
  return 0;
}

int bench_sample_jpeg(uint32_t width, uint32_t height, int quality, uint8_t** data, size_t* len) {
  bench_jpeg* c = (bench_jpeg*)calloc(1, sizeof *c);
  int rc = -1;
  if (c == NULL) return -1;
  c->row = (uint8_t*)malloc((size_t)width * 3);
  if (c->row != NULL) {
    c->cinfo.err = jpeg_std_error(&c->err);
    c->err.error_exit = on_error;
    rc = encode(c, width, height, quality);
    jpeg_destroy_compress(&c->cinfo);
  }
  /* On failure c->out may be stale (jpeg_mem_dest frees and replaces its buffer as it grows,
   * and says where only at the end): left alone, the bench stops anyway. */
  *data = rc == 0 ? c->out : NULL;
  *len = rc == 0 ? c->out_len : 0;
  free(c->row);
  free(c);
  return rc;
}
