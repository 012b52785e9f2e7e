#include "simulator_bridge/world/png.h"

#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"
#include "glog/logging.h"

namespace convoy::sim {
namespace {

// The largest width or height DecodePng accepts.
constexpr png_uint_32 kMaxDecodedSide = 16384;

// What libpng's callbacks share with the code that called libpng (as both its error and its I/O
// pointer): where the encoded bytes go or come from, and the message of the error that ended the
// call. libpng reports an error by calling OnPngError, which longjmps back to the setjmp in the
// function that made the failing call; so the functions that call setjmp (the Run* functions below)
// hold only trivially destructible locals, and everything with a destructor lives in their callers.
struct PngIo {
  std::vector<uint8_t>* out = nullptr;  // encoding
  const uint8_t* in = nullptr;          // decoding
  size_t in_size = 0;
  size_t in_pos = 0;
  char error[256] = {};
  char warning[256] = {};  // the last warning before it, which often says why
};

PngIo* IoOf(png_structp png) { return static_cast<PngIo*>(png_get_io_ptr(png)); }

[[noreturn]] void OnPngError(png_structp png, png_const_charp message) {
  PngIo* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->error, sizeof(io->error), "%s", message);
  png_longjmp(png, 1);
}

void OnPngWarning(png_structp png, png_const_charp message) {
  PngIo* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->warning, sizeof(io->warning), "%s", message);
  VLOG(1) << "libpng: " << message;
}

// libpng's error, with the warning before it when there was one ("Invalid IHDR data (Image width
// exceeds user limit in IHDR)").
std::string Describe(const PngIo& io) {
  if (io.warning[0] == '\0') return io.error;
  return absl::StrCat(io.error, " (", io.warning, ")");
}

void WriteToVector(png_structp png, png_bytep data, size_t length) {
  bool out_of_memory = false;
  try {
    IoOf(png)->out->insert(IoOf(png)->out->end(), data, data + length);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  // Outside the catch block: png_error longjmps and must not leave one.
  if (out_of_memory) png_error(png, "out of memory for the encoded image");
}

void FlushNothing(png_structp) {}

void ReadFromMemory(png_structp png, png_bytep data, size_t length) {
  PngIo* io = IoOf(png);
  if (length > io->in_size - io->in_pos) png_error(png, "PNG data truncated");
  std::copy(io->in + io->in_pos, io->in + io->in_pos + length, data);
  io->in_pos += length;
}

// Owns a libpng write or read struct and its info struct.
class PngStruct {
 public:
  enum Mode { kWrite, kRead };
  PngStruct(Mode mode, PngIo* io) : mode_(mode) {
    png_ = mode == kWrite
               ? png_create_write_struct(PNG_LIBPNG_VER_STRING, io, OnPngError, OnPngWarning)
               : png_create_read_struct(PNG_LIBPNG_VER_STRING, io, OnPngError, OnPngWarning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
  }
  ~PngStruct() {
    if (png_ == nullptr) return;
    png_infopp info = info_ != nullptr ? &info_ : nullptr;
    if (mode_ == kWrite) {
      png_destroy_write_struct(&png_, info);
    } else {
      png_destroy_read_struct(&png_, info, nullptr);
    }
  }
  PngStruct(const PngStruct&) = delete;
  PngStruct& operator=(const PngStruct&) = delete;

  bool ok() const { return png_ != nullptr && info_ != nullptr; }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }

 private:
  Mode mode_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

// Writes the whole PNG; false when libpng reported an error (its message is in the PngIo).
bool RunEncode(png_structp png, png_infop info, const uint8_t* pixels, int width, int height,
               int color_type, bool bgr, size_t stride) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, png_get_error_ptr(png), WriteToVector, FlushNothing);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  // Filter Sub on every row at zlib level 6: cheap, and compresses rendered images well.
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  if (bgr) png_set_bgr(png);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, pixels + stride * static_cast<size_t>(y));
  }
  png_write_end(png, nullptr);
  return true;
}

// Reads up to the image data and returns IHDR's fields; false on a libpng error.
bool RunReadHeader(png_structp png, png_infop info, png_uint_32* width, png_uint_32* height,
                   int* bit_depth, int* color_type, int* interlace) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, png_get_error_ptr(png), ReadFromMemory);
  // Every chunk's CRC is checked, ancillary ones too, and a bad one fails the decode; so do the
  // irregularities libpng would otherwise only warn about (such as surplus image data).
  png_set_crc_action(png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
  png_set_benign_errors(png, 0);
  png_set_user_limits(png, kMaxDecodedSide, kMaxDecodedSide);
  png_read_info(png, info);
  png_get_IHDR(png, info, width, height, bit_depth, color_type, interlace, nullptr, nullptr);
  return true;
}

// Reads the rows into `out` (height rows of `stride` bytes) and the chunks up to IEND.
bool RunReadImage(png_structp png, png_infop info, uint8_t* out, size_t stride,
                  png_uint_32 height) {
  if (setjmp(png_jmpbuf(png))) return false;
  for (png_uint_32 y = 0; y < height; ++y) png_read_row(png, out + stride * y, nullptr);
  png_read_end(png, info);
  return true;
}

}  // namespace

absl::Status EncodePng(const uint8_t* pixels, int width, int height, PixelOrder order,
                       std::vector<uint8_t>* png) {
  if (width <= 0 || height <= 0 || pixels == nullptr) {
    return absl::InvalidArgumentError("EncodePng: empty image");
  }
  int channels = 3;
  int color_type = PNG_COLOR_TYPE_RGB;
  switch (order) {
    case PixelOrder::kGray:
      channels = 1;
      color_type = PNG_COLOR_TYPE_GRAY;
      break;
    case PixelOrder::kRgb:
    case PixelOrder::kBgr:
      break;
    case PixelOrder::kRgba:
    case PixelOrder::kBgra:
      channels = 4;
      color_type = PNG_COLOR_TYPE_RGB_ALPHA;
      break;
  }
  const bool bgr = order == PixelOrder::kBgr || order == PixelOrder::kBgra;
  png->clear();
  PngIo io;
  io.out = png;
  PngStruct s(PngStruct::kWrite, &io);
  if (!s.ok()) return absl::ResourceExhaustedError("EncodePng: libpng could not start a write");
  if (!RunEncode(s.png(), s.info(), pixels, width, height, color_type, bgr,
                 static_cast<size_t>(width) * channels)) {
    png->clear();
    return absl::InternalError(absl::StrCat("EncodePng: libpng: ", Describe(io)));
  }
  return absl::OkStatus();
}

absl::Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height,
                      PixelOrder order) {
  std::vector<uint8_t> png;
  CONVOY_RETURN_IF_ERROR(EncodePng(pixels, width, height, order, &png));
  // Frames and maps are cheap to make again: atomic, without waiting for the disk.
  return WriteFileAtomically(
      path, absl::string_view(reinterpret_cast<const char*>(png.data()), png.size()), 0644,
      Durability::kAtomicOnly);
}

absl::StatusOr<std::vector<uint8_t>> DecodePng(const std::vector<uint8_t>& png, int* width,
                                               int* height, int* channels) {
  if (png.size() < 8 || png_sig_cmp(png.data(), 0, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG");
  }
  PngIo io;
  io.in = png.data();
  io.in_size = png.size();
  PngStruct s(PngStruct::kRead, &io);
  if (!s.ok()) return absl::ResourceExhaustedError("DecodePng: libpng could not start a read");
  png_uint_32 w = 0, h = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  if (!RunReadHeader(s.png(), s.info(), &w, &h, &bit_depth, &color_type, &interlace)) {
    return absl::InvalidArgumentError(absl::StrCat("PNG: ", Describe(io)));
  }
  if (bit_depth != 8 || interlace != PNG_INTERLACE_NONE) {
    return absl::UnimplementedError("PNG: 8-bit non-interlaced only");
  }
  const int ch = color_type == PNG_COLOR_TYPE_GRAY        ? 1
                 : color_type == PNG_COLOR_TYPE_RGB       ? 3
                 : color_type == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                                                          : 0;
  if (ch == 0) return absl::UnimplementedError("PNG: grey, RGB or RGBA only");
  if (w == 0 || h == 0 || w > kMaxDecodedSide || h > kMaxDecodedSide) {
    return absl::InvalidArgumentError("PNG size");
  }
  const size_t stride = static_cast<size_t>(w) * ch;
  std::vector<uint8_t> out(stride * h);
  if (!RunReadImage(s.png(), s.info(), out.data(), stride, h)) {
    return absl::InvalidArgumentError(absl::StrCat("PNG: ", Describe(io)));
  }
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  *channels = ch;
  return out;
}

}  // namespace convoy::sim
