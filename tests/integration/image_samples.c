#include "image_samples.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>
#include <zlib.h>

int sample_gradient(uint32_t width, uint32_t height, uint32_t channels, sample_image* out) {
  uint32_t x, y;
  out->width = width;
  out->height = height;
  out->channels = channels;
  out->pixels = (uint8_t*)malloc((size_t)width * height * channels);
  if (out->pixels == NULL) return -1;
  for (y = 0; y < height; ++y) {
    for (x = 0; x < width; ++x) {
      uint8_t* p = out->pixels + ((size_t)y * width + x) * channels;
      p[0] = (uint8_t)(width > 1 ? x * 255 / (width - 1) : 0);
      p[1] = (uint8_t)(height > 1 ? y * 255 / (height - 1) : 0);
      p[2] = 64;
      if (channels == 4) p[3] = x < width / 2 ? 255 : 0;
    }
  }
  return 0;
}

typedef struct sample_jpeg_error {
  struct jpeg_error_mgr base;
  jmp_buf jump;
} sample_jpeg_error;

static void jpeg_fail(j_common_ptr cinfo) { longjmp(((sample_jpeg_error*)cinfo->err)->jump, 1); }

typedef struct sample_jpeg_out {
  sample_jpeg_error err;
  struct jpeg_compress_struct cinfo;
  unsigned char* buffer;
  unsigned long size;
} sample_jpeg_out;

static int jpeg_write(sample_jpeg_out* c, const sample_image* image, int quality, int progressive) {
  uint32_t y;
  if (setjmp(c->err.jump) != 0) return -1;
  jpeg_create_compress(&c->cinfo);
  jpeg_mem_dest(&c->cinfo, &c->buffer, &c->size);
  c->cinfo.image_width = image->width;
  c->cinfo.image_height = image->height;
  c->cinfo.input_components = 3;
  c->cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c->cinfo);
  jpeg_set_quality(&c->cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c->cinfo);
  jpeg_start_compress(&c->cinfo, TRUE);
  for (y = 0; y < image->height; ++y) {
    JSAMPROW row = image->pixels + (size_t)y * image->width * 3;
    jpeg_write_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_compress(&c->cinfo);
  return 0;
}

int sample_encode_jpeg(const sample_image* image, int quality, int progressive, uint8_t** data,
                       size_t* len) {
  sample_jpeg_out* c = (sample_jpeg_out*)calloc(1, sizeof *c);
  int rc;
  if (c == NULL || image->channels != 3) {
    free(c);
    return -1;
  }
  c->cinfo.err = jpeg_std_error(&c->err.base);
  c->err.base.error_exit = jpeg_fail;
  rc = jpeg_write(c, image, quality, progressive);
  jpeg_destroy_compress(&c->cinfo);
  /* On failure c->buffer may be stale (jpeg_mem_dest replaces its buffer as it grows and says
   * where only at the end): left alone, the test fails anyway. */
  *data = rc == 0 ? c->buffer : NULL;
  *len = rc == 0 ? c->size : 0;
  free(c);
  return rc;
}

int sample_encode_png(const sample_image* image, uint8_t** data, size_t* len) {
  png_image png;
  png_alloc_size_t size = 0;
  memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = image->width;
  png.height = image->height;
  png.format = image->channels == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  if (!png_image_write_to_memory(&png, NULL, &size, 0, image->pixels, 0, NULL)) return -1;
  *data = (uint8_t*)malloc(size);
  if (*data == NULL) return -1;
  if (!png_image_write_to_memory(&png, *data, &size, 0, image->pixels, 0, NULL)) {
    free(*data);
    return -1;
  }
  *len = size;
  return 0;
}

int sample_encode_webp(const sample_image* image, int lossless, uint8_t** data, size_t* len) {
  const int stride = (int)(image->width * image->channels);
  uint8_t* out = NULL;
  size_t n;
  if (image->channels == 4) {
    n = lossless ? WebPEncodeLosslessRGBA(image->pixels, (int)image->width, (int)image->height,
                                          stride, &out)
                 : WebPEncodeRGBA(image->pixels, (int)image->width, (int)image->height, stride, 90,
                                  &out);
  } else {
    n = lossless
            ? WebPEncodeLosslessRGB(image->pixels, (int)image->width, (int)image->height, stride,
                                    &out)
            : WebPEncodeRGB(image->pixels, (int)image->width, (int)image->height, stride, 90, &out);
  }
  if (n == 0) return -1;
  /* Handed back for free(): WebPFree is free() in libwebp 1.2, but say so by copying. */
  *data = (uint8_t*)malloc(n);
  if (*data == NULL) {
    WebPFree(out);
    return -1;
  }
  memcpy(*data, out, n);
  WebPFree(out);
  *len = n;
  return 0;
}

typedef struct sample_png_out {
  png_structp png;
  png_infop info;
  uint8_t* data;
  size_t len;
  size_t cap;
  uint8_t* row;
} sample_png_out;

static void png_fail(png_structp png, png_const_charp msg) {
  (void)msg;
  png_longjmp(png, 1);
}

static void png_put(png_structp png, png_bytep bytes, size_t n) {
  sample_png_out* c = (sample_png_out*)png_get_io_ptr(png);
  if (c->len + n > c->cap) {
    uint8_t* grown;
    c->cap = (c->len + n) * 2;
    grown = (uint8_t*)realloc(c->data, c->cap);
    if (grown == NULL) png_error(png, "out of memory");
    c->data = grown;
  }
  memcpy(c->data + c->len, bytes, n);
  c->len += n;
}

static void png_flush_nothing(png_structp png) { (void)png; }

/* Row y of the image in the PNG's layout: samples of 1 or 2 bytes (big-endian), gray or RGB. */
static void png_row(const sample_image* image, uint32_t y, int color_type, int bit_depth,
                    uint8_t* row) {
  const uint8_t* src = image->pixels + (size_t)y * image->width * 3;
  const int samples = color_type == PNG_COLOR_TYPE_RGB ? 3 : 1;
  uint32_t x;
  int k;
  for (x = 0; x < image->width; ++x) {
    for (k = 0; k < samples; ++k) {
      const uint8_t v = samples == 1 ? src[3 * x + 1] : src[3 * x + k];
      if (bit_depth == 16) {
        row[(x * samples + k) * 2] = v;
        row[(x * samples + k) * 2 + 1] = v;
      } else {
        row[x * samples + k] = v;
      }
    }
  }
}

static int png_write_as(sample_png_out* c, const sample_image* image, int color_type, int bit_depth,
                        int interlace) {
  int pass, passes;
  uint32_t y;
  if (setjmp(png_jmpbuf(c->png)) != 0) return -1;
  png_set_write_fn(c->png, c, png_put, png_flush_nothing);
  png_set_IHDR(c->png, c->info, image->width, image->height, bit_depth, color_type, interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_color ramp[256];
    int i;
    for (i = 0; i < 256; ++i) ramp[i].red = ramp[i].green = ramp[i].blue = (png_byte)i;
    png_set_PLTE(c->png, c->info, ramp, 256);
  }
  png_write_info(c->png, c->info);
  passes = png_set_interlace_handling(c->png);
  for (pass = 0; pass < passes; ++pass) {
    for (y = 0; y < image->height; ++y) {
      png_row(image, y, color_type, bit_depth, c->row);
      png_write_row(c->png, c->row);
    }
  }
  png_write_end(c->png, NULL);
  return 0;
}

int sample_encode_png_as(const sample_image* image, int color_type, int bit_depth, int interlace,
                         uint8_t** data, size_t* len) {
  sample_png_out* c = (sample_png_out*)calloc(1, sizeof *c);
  int rc = -1;
  if (c == NULL || image->channels != 3) {
    free(c);
    return -1;
  }
  c->row = (uint8_t*)malloc((size_t)image->width * 6);
  c->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, c, png_fail, NULL);
  if (c->png != NULL) c->info = png_create_info_struct(c->png);
  if (c->row != NULL && c->info != NULL) {
    rc = png_write_as(c, image, color_type, bit_depth, interlace);
  }
  png_destroy_write_struct(c->png != NULL ? &c->png : NULL, c->info != NULL ? &c->info : NULL);
  *data = rc == 0 ? c->data : NULL;
  *len = rc == 0 ? c->len : 0;
  if (rc != 0) free(c->data);
  free(c->row);
  free(c);
  return rc;
}

/* PNG chunks by hand: length, type, data, CRC of type and data. */
static void put32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static uint8_t* put_chunk(uint8_t* at, const char* type, const uint8_t* body, uint32_t n) {
  put32(at, n);
  memcpy(at + 4, type, 4);
  if (n > 0) memcpy(at + 8, body, n);
  put32(at + 8 + n, (uint32_t)crc32(crc32(0, NULL, 0), at + 4, n + 4));
  return at + 12 + n;
}

int sample_png_bomb(uint32_t width, uint32_t height, uint8_t** data, size_t* len) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const size_t row = (size_t)width * 3 + 1;                   /* filter byte 0, then black pixels */
  uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 2, 0, 0, 0}; /* 8-bit RGB */
  uint8_t* zeros = (uint8_t*)calloc(1, row);
  uint8_t* idat = NULL;
  uint8_t* at;
  z_stream z;
  uint32_t y;
  size_t cap;
  int ok = zeros != NULL;
  memset(&z, 0, sizeof z);
  if (ok) ok = deflateInit2(&z, 9, Z_DEFLATED, 15, 9, Z_RLE) == Z_OK;
  cap = ok ? deflateBound(&z, row * height) : 0;
  if (ok) ok = (idat = (uint8_t*)malloc(cap)) != NULL;
  z.next_out = idat;
  z.avail_out = (uInt)cap;
  for (y = 0; ok && y < height; ++y) {
    z.next_in = zeros;
    z.avail_in = (uInt)row;
    ok = deflate(&z, y + 1 == height ? Z_FINISH : Z_NO_FLUSH) != Z_STREAM_ERROR;
  }
  deflateEnd(&z);
  free(zeros);
  *data = ok ? (uint8_t*)malloc(8 + 25 + 12 + z.total_out + 12) : NULL;
  if (*data == NULL) {
    free(idat);
    return -1;
  }
  put32(ihdr, width);
  put32(ihdr + 4, height);
  memcpy(*data, kSignature, 8);
  at = put_chunk(*data + 8, "IHDR", ihdr, 13);
  at = put_chunk(at, "IDAT", idat, (uint32_t)z.total_out);
  at = put_chunk(at, "IEND", NULL, 0);
  *len = (size_t)(at - *data);
  free(idat);
  return 0;
}

typedef struct sample_jpeg_in {
  sample_jpeg_error err;
  struct jpeg_decompress_struct cinfo;
} sample_jpeg_in;

static int jpeg_read(sample_jpeg_in* c, const uint8_t* data, size_t len, sample_image* out) {
  if (setjmp(c->err.jump) != 0) return -1;
  jpeg_create_decompress(&c->cinfo);
  jpeg_mem_src(&c->cinfo, data, (unsigned long)len);
  jpeg_read_header(&c->cinfo, TRUE);
  c->cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&c->cinfo);
  out->width = c->cinfo.output_width;
  out->height = c->cinfo.output_height;
  out->channels = 3;
  out->pixels = (uint8_t*)malloc((size_t)out->width * out->height * 3);
  if (out->pixels == NULL) return -1;
  while (c->cinfo.output_scanline < c->cinfo.output_height) {
    JSAMPROW row = out->pixels + (size_t)c->cinfo.output_scanline * out->width * 3;
    jpeg_read_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&c->cinfo);
  return 0;
}

static int png_read(const uint8_t* data, size_t len, sample_image* out) {
  png_image png;
  memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data, len)) return -1;
  png.format = (png.format & PNG_FORMAT_FLAG_ALPHA) ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  out->width = png.width;
  out->height = png.height;
  out->channels = PNG_IMAGE_PIXEL_CHANNELS(png.format);
  out->pixels = (uint8_t*)malloc(PNG_IMAGE_SIZE(png));
  if (out->pixels == NULL || !png_image_finish_read(&png, NULL, out->pixels, 0, NULL)) {
    png_image_free(&png);
    return -1;
  }
  return 0;
}

int sample_decode(const uint8_t* data, size_t len, sample_image* out) {
  memset(out, 0, sizeof *out);
  if (len >= 8 && png_sig_cmp(data, 0, 8) == 0) return png_read(data, len, out);
  if (len >= 2 && data[0] == 0xff && data[1] == 0xd8) {
    sample_jpeg_in* c = (sample_jpeg_in*)calloc(1, sizeof *c);
    int rc;
    if (c == NULL) return -1;
    c->cinfo.err = jpeg_std_error(&c->err.base);
    c->err.base.error_exit = jpeg_fail;
    rc = jpeg_read(c, data, len, out);
    jpeg_destroy_decompress(&c->cinfo);
    free(c);
    if (rc != 0) {
      free(out->pixels);
      out->pixels = NULL;
    }
    return rc;
  }
  return -1;
}
