// C++ wrappers of image_samples.h for the thumbnail tests: encoded images as std::string
// (what a payload holds), decoded ones as a value that frees itself.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "image_samples.h"

namespace sandpool::testing {

enum class ImageFormat { kJpeg, kProgressiveJpeg, kPng, kWebpLossy, kWebpLossless };

// A decoded image; pixel(x, y)[c] reads channel c.
class DecodedImage {
 public:
  explicit DecodedImage(sample_image raw) : raw_(raw), owner_(raw.pixels, &std::free) {}
  std::uint32_t width() const { return raw_.width; }
  std::uint32_t height() const { return raw_.height; }
  std::uint32_t channels() const { return raw_.channels; }
  const std::uint8_t* pixel(std::uint32_t x, std::uint32_t y) const {
    return raw_.pixels + (static_cast<std::size_t>(y) * raw_.width + x) * raw_.channels;
  }
  const sample_image& raw() const { return raw_; }

 private:
  sample_image raw_;
  std::unique_ptr<std::uint8_t, decltype(&std::free)> owner_;
};

// The gradient of sample_gradient().
inline DecodedImage gradient(std::uint32_t width, std::uint32_t height,
                             std::uint32_t channels = 3) {
  sample_image g{};
  REQUIRE(sample_gradient(width, height, channels, &g) == 0);
  return DecodedImage(g);
}

inline std::string take(std::uint8_t* data, std::size_t len) {
  std::string out(reinterpret_cast<const char*>(data), len);
  std::free(data);
  return out;
}

// `image` encoded as `format` through the libraries themselves.
inline std::string encode(const DecodedImage& image, ImageFormat format) {
  std::uint8_t* data = nullptr;
  std::size_t len = 0;
  int rc = -1;
  switch (format) {
    case ImageFormat::kJpeg:
    case ImageFormat::kProgressiveJpeg:
      rc = sample_encode_jpeg(&image.raw(), 90, format == ImageFormat::kProgressiveJpeg, &data,
                              &len);
      break;
    case ImageFormat::kPng:
      rc = sample_encode_png(&image.raw(), &data, &len);
      break;
    case ImageFormat::kWebpLossy:
    case ImageFormat::kWebpLossless:
      rc = sample_encode_webp(&image.raw(), format == ImageFormat::kWebpLossless, &data, &len);
      break;
  }
  REQUIRE(rc == 0);
  return take(data, len);
}

// A PNG or JPEG (a thumbnail) decoded; the test fails when it does not decode.
inline DecodedImage decode(const std::string& bytes) {
  sample_image out{};
  INFO("decoding " << bytes.size() << " bytes");
  REQUIRE(sample_decode(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), &out) ==
          0);
  return DecodedImage(out);
}

// The thumbnail payload: options, a NUL, the image.
inline std::string thumbnail_payload(const std::string& options, const std::string& image) {
  return options + std::string(1, '\0') + image;
}

}  // namespace sandpool::testing
