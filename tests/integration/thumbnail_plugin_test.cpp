// The thumbnail plugin (plugins/thumbnail/) on Debian's libjpeg-turbo, libpng and libwebp,
// through a real Pool under the default strict seccomp profile: images made in the test by
// the same libraries, thumbnails decoded back and looked at. Malformed files and bombs are in
// tests/hostile/thumbnail_test.cpp.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "image_samples.hpp"
#include "test_support.hpp"

using namespace sandpool;
using sandpool::testing::DecodedImage;
using sandpool::testing::ImageFormat;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::run;
using sandpool::testing::thumbnail_payload;

namespace {

PoolOptions thumbnail_pool(const std::string& plugin_config = "{}") {
  PoolOptions o = pool_options("thumbnail", 1);
  o.plugin_config_json = plugin_config;
  return o;
}

TaskResult run_thumbnail(Pool& pool, std::string payload) {
  SubmitOptions so;
  so.retries = 0;
  return run(pool, "thumbnail", std::move(payload), so);
}

// The thumbnail a completed task answered, decoded.
DecodedImage thumbnail_of(Pool& pool, const std::string& options, const std::string& image) {
  const TaskResult r = run_thumbnail(pool, thumbnail_payload(options, image));
  INFO(r.error);
  REQUIRE(r.state == TaskState::kCompleted);
  return sandpool::testing::decode(r.result);
}

// Channel c of pixel (x, y) is within `tolerance` of `expected`.
void check_near(const DecodedImage& image, std::uint32_t x, std::uint32_t y, std::uint32_t c,
                int expected, int tolerance) {
  INFO("pixel (" << x << ", " << y << ") channel " << c);
  CHECK(std::abs(image.pixel(x, y)[c] - expected) <= tolerance);
}

}  // namespace

TEST_CASE("a thumbnail of a JPEG, PNG or WebP fits the box and keeps the picture") {
  auto pool = make_pool(thumbnail_pool());
  const auto [format, tolerance] = GENERATE(table<ImageFormat, int>({
      {ImageFormat::kPng, 2},
      {ImageFormat::kWebpLossless, 2},
      {ImageFormat::kJpeg, 8},
      {ImageFormat::kProgressiveJpeg, 8},
      {ImageFormat::kWebpLossy, 12},
  }));
  const std::string image =
      sandpool::testing::encode(sandpool::testing::gradient(320, 240), format);
  const DecodedImage t = thumbnail_of(*pool, "width=64", image);
  REQUIRE(t.width() == 64);
  REQUIRE(t.height() == 48);  // 320x240 is 4:3
  CHECK(t.channels() == 3);
  // Each output pixel is the mean of the 5x5 input pixels it covers: red grows across,
  // green down, blue stays 64 (sample_gradient).
  check_near(t, 0, 0, 0, 2, tolerance);
  check_near(t, 0, 0, 1, 2, tolerance);
  check_near(t, 32, 24, 0, 130, tolerance);
  check_near(t, 32, 24, 1, 130, tolerance);
  check_near(t, 63, 47, 0, 253, tolerance);
  check_near(t, 63, 47, 1, 253, tolerance);
  check_near(t, 63, 47, 2, 64, tolerance);
}

TEST_CASE("gray, palette, 16-bit and interlaced PNGs are read as 8-bit RGB") {
  auto pool = make_pool(thumbnail_pool());
  const auto source = sandpool::testing::gradient(320, 240);
  const auto [color_type, bit_depth, interlace] = GENERATE(table<int, int, int>({
      {0 /* gray */, 8, 0},
      {0 /* gray */, 16, 1 /* Adam7 */},
      {3 /* palette */, 8, 0},
      {2 /* RGB */, 16, 0},
      {2 /* RGB */, 8, 1 /* Adam7 */},
  }));
  INFO("color type " << color_type << ", " << bit_depth << " bits, interlace " << interlace);
  std::uint8_t* data = nullptr;
  std::size_t len = 0;
  REQUIRE(sample_encode_png_as(&source.raw(), color_type, bit_depth, interlace, &data, &len) == 0);
  const DecodedImage t = thumbnail_of(*pool, "width=64", sandpool::testing::take(data, len));
  REQUIRE(t.width() == 64);
  REQUIRE(t.height() == 48);
  REQUIRE(t.channels() == 3);
  // Green (the gray of the gray and palette kinds) grows down; red across, in RGB only.
  const bool gray = color_type != 2;
  check_near(t, 32, 47, 1, 253, 1);
  check_near(t, 63, 24, 0, gray ? 130 : 253, 1);
  check_near(t, 63, 24, 2, gray ? 130 : 64, 1);
}

TEST_CASE("a thumbnail fits the box it is given, the pool's default box, and is never enlarged") {
  auto pool = make_pool(thumbnail_pool(R"({"width": 40, "height": 40})"));
  const std::string png =
      sandpool::testing::encode(sandpool::testing::gradient(300, 100), ImageFormat::kPng);
  const auto [options, width, height] = GENERATE(table<std::string, std::uint32_t, std::uint32_t>({
      {"width=150", 150, 50},
      {"height=20", 60, 20},
      {"width=150 height=20", 60, 20},  // the box: the tighter side binds
      {"width=100  height=100", 100, 33},
      {"", 40, 13},  // plugin_config's 40x40
      {"format=png", 40, 13},
      {"width=1000", 300, 100},  // never enlarged
      {"width=1", 1, 1},         // 1 x 0.33, rounded up to a pixel
  }));
  INFO("options '" << options << "'");
  const DecodedImage t = thumbnail_of(*pool, options, png);
  CHECK(t.width() == width);
  CHECK(t.height() == height);
}

TEST_CASE("a thumbnail can be a JPEG, of the quality asked for") {
  auto pool = make_pool(thumbnail_pool());
  const std::string png =
      sandpool::testing::encode(sandpool::testing::gradient(256, 256), ImageFormat::kPng);
  const TaskResult low =
      run_thumbnail(*pool, thumbnail_payload("width=128 format=jpeg quality=20", png));
  const TaskResult high =
      run_thumbnail(*pool, thumbnail_payload("width=128 format=jpeg quality=95", png));
  REQUIRE(low.state == TaskState::kCompleted);
  REQUIRE(high.state == TaskState::kCompleted);
  CHECK(low.result.substr(0, 3) == "\xff\xd8\xff");
  CHECK(low.result.size() < high.result.size());
  const DecodedImage t = sandpool::testing::decode(high.result);
  CHECK(t.width() == 128);
  check_near(t, 127, 127, 0, 254, 6);
  // A pool whose default format is jpeg takes quality without format=jpeg in the options.
  auto jpeg_pool = make_pool(thumbnail_pool(R"({"format": "jpeg", "quality": 95})"));
  const TaskResult by_default = run_thumbnail(*jpeg_pool, thumbnail_payload("width=128", png));
  const TaskResult asked =
      run_thumbnail(*jpeg_pool, thumbnail_payload("width=128 quality=20", png));
  REQUIRE(by_default.state == TaskState::kCompleted);
  REQUIRE(asked.state == TaskState::kCompleted);
  CHECK(by_default.result == high.result);
  CHECK(asked.result == low.result);
}

TEST_CASE("transparency stays in a PNG thumbnail and turns white in a JPEG one") {
  auto pool = make_pool(thumbnail_pool());
  // Opaque on the left half, transparent on the right (sample_gradient with 4 channels).
  const auto rgba = sandpool::testing::gradient(190, 100, 4);
  for (ImageFormat format : {ImageFormat::kPng, ImageFormat::kWebpLossless}) {
    const std::string image = sandpool::testing::encode(rgba, format);
    const DecodedImage png = thumbnail_of(*pool, "width=19", image);
    REQUIRE(png.width() == 19);
    REQUIRE(png.channels() == 4);
    CHECK(png.pixel(2, 5)[3] == 255);
    CHECK(png.pixel(17, 5)[3] == 0);
    // Column 9 averages x = 90..99, where 90..94 are opaque and 95..99 transparent: half
    // alpha, and the colour of the opaque ones only (alpha premultiplied while averaging).
    check_near(png, 9, 5, 3, 128, 1);
    check_near(png, 9, 5, 0, 124, 2);  // the mean red of x = 90..94; of 90..99 it would be 128
    const DecodedImage jpeg = thumbnail_of(*pool, "width=19 format=jpeg quality=95", image);
    REQUIRE(jpeg.channels() == 3);
    check_near(jpeg, 17, 5, 0, 255, 6);
    check_near(jpeg, 17, 5, 2, 255, 6);
    check_near(jpeg, 2, 5, 2, 64, 6);
  }
}

TEST_CASE("a thumbnail task whose payload is not <options> NUL <image> fails permanently") {
  auto pool = make_pool(thumbnail_pool());
  const std::string png =
      sandpool::testing::encode(sandpool::testing::gradient(8, 8), ImageFormat::kPng);
  const auto [payload, error] = GENERATE_COPY(table<std::string, std::string>({
      {"", "thumbnail: the payload is empty: it is <options> NUL <image>"},
      {"width=64",
       "thumbnail: the payload is <options> NUL <image>, options at most 256 bytes; found no NUL"},
      {png,
       "thumbnail: the options before the first NUL are not text: the payload is <options> NUL "
       "<image>, and a payload of the image alone needs a NUL in front"},
      {thumbnail_payload("size=64", png),
       "thumbnail: unknown option 'size' (width, height, format, quality)"},
      {thumbnail_payload("width=0", png),
       "thumbnail: option 'width=0': expected a size of 1 to 65535 pixels"},
      {thumbnail_payload("width=99999", png),
       "thumbnail: option 'width=99999': expected a size of 1 to 65535 pixels"},
      {thumbnail_payload("format=gif", png),
       "thumbnail: option 'format=gif': expected format=png or format=jpeg"},
      {thumbnail_payload("format=jpeg quality=101", png),
       "thumbnail: option 'quality=101': expected quality=1 to quality=100"},
      {thumbnail_payload("quality=50", png), "thumbnail: quality is for format=jpeg"},
      {thumbnail_payload("width=8 width=9", png), "thumbnail: option 'width' given twice"},
      {thumbnail_payload("width=8", ""), "thumbnail: the image is empty"},
      {thumbnail_payload("width=8", "GIF89a..."),
       "thumbnail: not a JPEG, PNG or WebP image (its first bytes are none of their "
       "signatures)"},
  }));
  const TaskResult r = run_thumbnail(*pool, payload);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == error);
}

TEST_CASE("an image over max_pixels, max_width or max_height is refused as resource_limit") {
  const std::string jpeg =
      sandpool::testing::encode(sandpool::testing::gradient(320, 240), ImageFormat::kJpeg);
  const auto [config, error] = GENERATE(table<std::string, std::string>({
      {R"({"max_pixels": 76799})",
       "thumbnail: jpeg: the image is 320x240 = 76800 pixels, more than max_pixels 76799"},
      {R"({"max_width": 319})",
       "thumbnail: jpeg: the image is 320 pixels wide, more than max_width 319"},
      {R"({"max_height": 200})",
       "thumbnail: jpeg: the image is 240 pixels high, more than max_height 200"},
  }));
  auto pool = make_pool(thumbnail_pool(config));
  const TaskResult r = run_thumbnail(*pool, thumbnail_payload("width=32", jpeg));
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(r.error == error);
  // At the limit it passes.
  auto exact = make_pool(thumbnail_pool(R"({"max_pixels": 76800, "max_width": 320})"));
  CHECK(run_thumbnail(*exact, thumbnail_payload("width=32", jpeg)).state == TaskState::kCompleted);
}

TEST_CASE("a thumbnail pool whose plugin_config is wrong does not start") {
  auto config = GENERATE(as<std::string>{}, R"({"max_pixel": 5})", R"({"format": "gif"})",
                         R"({"quality": 0})", R"({"width": 70000})", R"({"max_pixels": -1})");
  PoolOptions o = thumbnail_pool(config);
  o.max_init_failures = 1;
  auto pool = Pool::create(o);
  CHECK_FALSE(pool);
}
