// PNG encoding and decoding in memory with libpng (8-bit grey, RGB or RGBA, no interlace), for
// AirSim's compressed images and --dump_frames. Every libpng error comes back as an absl::Status.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_PNG_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_PNG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy::sim {

enum class PixelOrder { kGray, kRgb, kBgr, kRgba, kBgra };

// Encodes width*height pixels (rows top to bottom, tightly packed) into `png` (replaced; its
// capacity is reused). BGR(A) input is written as RGB(A), as every PNG is. InvalidArgument for an
// empty image, Internal (with libpng's message) when libpng fails; `png` is then empty.
absl::Status EncodePng(const uint8_t* pixels, int width, int height, PixelOrder order,
                       std::vector<uint8_t>* png);

// Encodes and writes to `path`, replaced atomically (common/support/files.h WriteFileAtomically, kAtomicOnly).
absl::Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height,
                      PixelOrder order);

// Decodes what EncodePng writes (8-bit, filter types 0-4, non-interlaced) into RGB/RGBA/grey bytes;
// for tests and tools. Returns channels through `channels`. InvalidArgument, naming the fault, for
// data that is not a well-formed PNG (bad signature, CRC, truncation, sides over 16384, ...);
// Unimplemented for other bit depths, interlacing or colour types. The outputs are set only on
// success.
absl::StatusOr<std::vector<uint8_t>> DecodePng(const std::vector<uint8_t>& png, int* width,
                                               int* height, int* channels);

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_PNG_H_
