#include "simulator_bridge/png.h"

#include <catch2/catch.hpp>

namespace convoy {
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

}  // namespace
}  // namespace convoy
