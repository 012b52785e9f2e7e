// A small PNG encoder over zlib (8-bit grey, RGB or RGBA, no interlace), for AirSim's compressed
// images and --dump_frames.
#ifndef CONVOY_SIMULATOR_BRIDGE_PNG_H_
#define CONVOY_SIMULATOR_BRIDGE_PNG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy {

enum class PixelOrder { kGray, kRgb, kBgr, kRgba, kBgra };

// Encodes width*height pixels (rows top to bottom, tightly packed) into `png` (replaced). BGR(A)
// input is written as RGB(A), as every PNG is.
absl::Status EncodePng(const uint8_t* pixels, int width, int height, PixelOrder order,
                       std::vector<uint8_t>* png);

// Encodes and writes to `path` (replaced atomically via a temporary file and rename).
absl::Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height,
                      PixelOrder order);

// Decodes what EncodePng writes (8-bit, filter types 0-4, non-interlaced) into RGB/RGBA/grey bytes;
// for tests and tools. Returns channels through `channels`.
absl::StatusOr<std::vector<uint8_t>> DecodePng(const std::vector<uint8_t>& png, int* width,
                                               int* height, int* channels);

}  // namespace convoy

#endif  // CONVOY_SIMULATOR_BRIDGE_PNG_H_
