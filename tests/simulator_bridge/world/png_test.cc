#include "simulator_bridge/world/png.h"

#include <png.h>

#include <csetjmp>
#include <string>
#include <vector>

#include "tests/catch.h"

namespace convoy::sim {
namespace {

TEST_CASE("PNG encoding round-trips grey, RGB and BGRA pixels", "[png]") {
  const int w = 17, h = 9;
  std::vector<uint8_t> bgra(w * h * 4);
  for (size_t i = 0; i < bgra.size(); ++i) bgra[i] = static_cast<uint8_t>(i * 37 + 11);
  std::vector<uint8_t> png;
  REQUIRE(EncodePng(bgra.data(), w, h, PixelOrder::kBgra, &png).ok());
  int dw, dh, channels;
  absl::StatusOr<std::vector<uint8_t>> rgba = DecodePng(png, &dw, &dh, &channels);
  REQUIRE(rgba.ok());
  CHECK(dw == w);
  CHECK(dh == h);
  CHECK(channels == 4);
  for (int p = 0; p < w * h; ++p) {
    CHECK((*rgba)[p * 4 + 0] == bgra[p * 4 + 2]);
    CHECK((*rgba)[p * 4 + 2] == bgra[p * 4 + 0]);
    CHECK((*rgba)[p * 4 + 3] == bgra[p * 4 + 3]);
  }
  REQUIRE(EncodePng(bgra.data(), w, h, PixelOrder::kGray, &png).ok());
  absl::StatusOr<std::vector<uint8_t>> gray = DecodePng(png, &dw, &dh, &channels);
  REQUIRE(gray.ok());
  CHECK(channels == 1);
  CHECK(std::equal(gray->begin(), gray->end(), bgra.begin()));
}

TEST_CASE("a corrupted PNG is rejected", "[png]") {
  std::vector<uint8_t> pixels(12, 7), png;
  REQUIRE(EncodePng(pixels.data(), 2, 2, PixelOrder::kRgb, &png).ok());
  png[20] ^= 0xff;
  int w, h, c;
  CHECK_FALSE(DecodePng(png, &w, &h, &c).ok());
  CHECK_FALSE(EncodePng(pixels.data(), 0, 2, PixelOrder::kRgb, &png).ok());
}

// A PNG written by libpng directly, with settings EncodePng never uses (its adaptive filters, any
// bit depth and colour type): what another tool could hand DecodePng.
std::vector<uint8_t> LibpngWritten(int width, int height, int bit_depth, int color_type,
                                   const std::vector<uint8_t>& rows) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return {};
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, size_t n) {
        auto* v = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        v->insert(v->end(), data, data + n);
      },
      [](png_structp) {});
  png_set_IHDR(png, info, width, height, bit_depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
  png_write_info(png, info);
  const size_t stride = rows.size() / height;
  for (int y = 0; y < height; ++y) png_write_row(png, rows.data() + stride * y);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

TEST_CASE("PNG encoding writes RGB from RGB and BGR input alike", "[png]") {
  const int w = 5, h = 3;
  std::vector<uint8_t> rgb(w * h * 3), bgr(w * h * 3);
  for (int p = 0; p < w * h; ++p) {
    for (int c = 0; c < 3; ++c) {
      rgb[p * 3 + c] = static_cast<uint8_t>(p * 13 + c * 71);
      bgr[p * 3 + 2 - c] = rgb[p * 3 + c];
    }
  }
  std::vector<uint8_t> from_rgb, from_bgr;
  REQUIRE(EncodePng(rgb.data(), w, h, PixelOrder::kRgb, &from_rgb).ok());
  REQUIRE(EncodePng(bgr.data(), w, h, PixelOrder::kBgr, &from_bgr).ok());
  CHECK(from_rgb == from_bgr);
  int dw = 0, dh = 0, channels = 0;
  absl::StatusOr<std::vector<uint8_t>> decoded = DecodePng(from_bgr, &dw, &dh, &channels);
  REQUIRE(decoded.ok());
  CHECK(dw == w);
  CHECK(dh == h);
  CHECK(channels == 3);
  CHECK(*decoded == rgb);
}

TEST_CASE("PNG decoding reads rows under every filter type", "[png]") {
  const int w = 31, h = 23;
  std::vector<uint8_t> rgba(w * h * 4);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = static_cast<uint8_t>((i * i) % 251);
  const std::vector<uint8_t> png = LibpngWritten(w, h, 8, PNG_COLOR_TYPE_RGB_ALPHA, rgba);
  REQUIRE_FALSE(png.empty());
  int dw = 0, dh = 0, channels = 0;
  absl::StatusOr<std::vector<uint8_t>> decoded = DecodePng(png, &dw, &dh, &channels);
  REQUIRE(decoded.ok());
  CHECK(channels == 4);
  CHECK(*decoded == rgba);
}

TEST_CASE("libpng's errors come back as statuses that name the fault", "[png]") {
  std::vector<uint8_t> pixels(4 * 4 * 3, 99), png;
  REQUIRE(EncodePng(pixels.data(), 4, 4, PixelOrder::kRgb, &png).ok());
  int w = -1, h = -1, c = -1;

  SECTION("not a PNG") {
    absl::StatusOr<std::vector<uint8_t>> r = DecodePng({1, 2, 3}, &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(r.status().message() == "not a PNG");
  }
  SECTION("a chunk's CRC") {
    png[20] ^= 0xff;  // IHDR's height
    absl::StatusOr<std::vector<uint8_t>> r = DecodePng(png, &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Matchers::ContainsSubstring("CRC"));
  }
  SECTION("truncated data") {
    png.resize(png.size() - 20);
    absl::StatusOr<std::vector<uint8_t>> r = DecodePng(png, &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Matchers::ContainsSubstring("truncated"));
  }
  SECTION("a side over 16384") {
    std::vector<uint8_t> wide_row(16385, 0);
    absl::StatusOr<std::vector<uint8_t>> r =
        DecodePng(LibpngWritten(16385, 1, 8, PNG_COLOR_TYPE_GRAY, wide_row), &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Matchers::ContainsSubstring("width"));
  }
  SECTION("a bit depth other than 8") {
    std::vector<uint8_t> rows(4 * 4 * 2, 1);
    absl::StatusOr<std::vector<uint8_t>> r =
        DecodePng(LibpngWritten(4, 4, 16, PNG_COLOR_TYPE_GRAY, rows), &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kUnimplemented);
  }
  SECTION("grey with alpha") {
    std::vector<uint8_t> rows(4 * 4 * 2, 0);
    absl::StatusOr<std::vector<uint8_t>> r =
        DecodePng(LibpngWritten(4, 4, 8, PNG_COLOR_TYPE_GRAY_ALPHA, rows), &w, &h, &c);
    CHECK(r.status().code() == absl::StatusCode::kUnimplemented);
  }
  CHECK(w == -1);
  CHECK(h == -1);
  CHECK(c == -1);
}

}  // namespace
}  // namespace convoy::sim
