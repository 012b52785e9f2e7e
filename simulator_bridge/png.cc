#include "simulator_bridge/png.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

constexpr uint8_t kSignature[8] = {137, 80, 78, 71, 13, 10, 26, 10};

void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v >> 24));
  out->push_back(static_cast<uint8_t>(v >> 16));
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}

uint32_t GetU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void PutChunk(std::vector<uint8_t>* out, const char type[4], const uint8_t* data, size_t size) {
  PutU32(out, static_cast<uint32_t>(size));
  const size_t start = out->size();
  out->insert(out->end(), type, type + 4);
  if (size > 0) out->insert(out->end(), data, data + size);
  const uLong crc = crc32(0L, out->data() + start, static_cast<uInt>(size + 4));
  PutU32(out, static_cast<uint32_t>(crc));
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

absl::Status EncodePng(const uint8_t* pixels, int width, int height, PixelOrder order,
                       std::vector<uint8_t>* png) {
  if (width <= 0 || height <= 0 || pixels == nullptr) {
    return absl::InvalidArgumentError("EncodePng: empty image");
  }
  int channels = 3;
  uint8_t color_type = 2;
  switch (order) {
    case PixelOrder::kGray:
      channels = 1;
      color_type = 0;
      break;
    case PixelOrder::kRgb:
    case PixelOrder::kBgr:
      break;
    case PixelOrder::kRgba:
    case PixelOrder::kBgra:
      channels = 4;
      color_type = 6;
      break;
  }
  const bool swap = order == PixelOrder::kBgr || order == PixelOrder::kBgra;
  const size_t stride = static_cast<size_t>(width) * channels;
  // Filter 1 (Sub) on every row: cheap and compresses rendered images well.
  std::vector<uint8_t> raw((stride + 1) * height);
  for (int y = 0; y < height; ++y) {
    uint8_t* out = &raw[(stride + 1) * y];
    out[0] = 1;
    const uint8_t* row = pixels + stride * y;
    for (size_t i = 0; i < stride; ++i) {
      size_t src = i;
      if (swap && (i % channels) != 3) src = i - (i % channels) + (2 - (i % channels));
      const int left_index = static_cast<int>(i) - channels;
      size_t left_src = 0;
      if (left_index >= 0) {
        left_src = static_cast<size_t>(left_index);
        if (swap && (left_src % channels) != 3) {
          left_src = left_src - (left_src % channels) + (2 - (left_src % channels));
        }
      }
      const uint8_t left = left_index >= 0 ? row[left_src] : 0;
      out[1 + i] = static_cast<uint8_t>(row[src] - left);
    }
  }
  uLongf compressed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> compressed(compressed_size);
  if (compress2(compressed.data(), &compressed_size, raw.data(), static_cast<uLong>(raw.size()),
                6) != Z_OK) {
    return absl::InternalError("EncodePng: zlib compress2 failed");
  }
  png->clear();
  png->reserve(compressed_size + 64);
  png->insert(png->end(), kSignature, kSignature + 8);
  std::vector<uint8_t> header;
  PutU32(&header, static_cast<uint32_t>(width));
  PutU32(&header, static_cast<uint32_t>(height));
  header.insert(header.end(), {8, color_type, 0, 0, 0});
  PutChunk(png, "IHDR", header.data(), header.size());
  PutChunk(png, "IDAT", compressed.data(), compressed_size);
  PutChunk(png, "IEND", nullptr, 0);
  return absl::OkStatus();
}

absl::Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height,
                      PixelOrder order) {
  std::vector<uint8_t> png;
  if (absl::Status s = EncodePng(pixels, width, height, order, &png); !s.ok()) return s;
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  const bool ok = std::fwrite(png.data(), 1, png.size(), f) == png.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> DecodePng(const std::vector<uint8_t>& png, int* width,
                                               int* height, int* channels) {
  if (png.size() < 8 || std::memcmp(png.data(), kSignature, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG");
  }
  size_t pos = 8;
  std::vector<uint8_t> idat;
  int w = 0, h = 0, ch = 0;
  while (pos + 12 <= png.size()) {
    const uint32_t len = GetU32(&png[pos]);
    if (len > png.size() - pos - 12) return absl::InvalidArgumentError("PNG chunk truncated");
    const uint8_t* type = &png[pos + 4];
    const uint8_t* data = &png[pos + 8];
    if (crc32(0L, type, len + 4) != GetU32(data + len)) {
      return absl::InvalidArgumentError("PNG chunk CRC mismatch");
    }
    if (std::memcmp(type, "IHDR", 4) == 0 && len == 13) {
      w = static_cast<int>(GetU32(data));
      h = static_cast<int>(GetU32(data + 4));
      if (data[8] != 8 || data[12] != 0) return absl::UnimplementedError("PNG: 8-bit only");
      ch = data[9] == 0 ? 1 : data[9] == 2 ? 3 : data[9] == 6 ? 4 : 0;
      if (ch == 0) return absl::UnimplementedError("PNG: grey, RGB or RGBA only");
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      idat.insert(idat.end(), data, data + len);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      break;
    }
    pos += 12 + len;
  }
  if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return absl::InvalidArgumentError("PNG size");
  const size_t stride = static_cast<size_t>(w) * ch;
  std::vector<uint8_t> raw((stride + 1) * h);
  uLongf raw_size = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &raw_size, idat.data(), static_cast<uLong>(idat.size())) != Z_OK ||
      raw_size != raw.size()) {
    return absl::InvalidArgumentError("PNG: bad image data");
  }
  std::vector<uint8_t> out(stride * h);
  for (int y = 0; y < h; ++y) {
    const uint8_t filter = raw[(stride + 1) * y];
    const uint8_t* in = &raw[(stride + 1) * y + 1];
    uint8_t* row = &out[stride * y];
    const uint8_t* up = y > 0 ? &out[stride * (y - 1)] : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(ch) ? row[i - ch] : 0;
      const int b = up != nullptr ? up[i] : 0;
      const int c = (up != nullptr && i >= static_cast<size_t>(ch)) ? up[i - ch] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4:
          predicted = Paeth(a, b, c);
          break;
        default:
          return absl::InvalidArgumentError("PNG: bad filter");
      }
      row[i] = static_cast<uint8_t>(in[i] + predicted);
    }
  }
  *width = w;
  *height = h;
  *channels = ch;
  return out;
}

}  // namespace convoy
