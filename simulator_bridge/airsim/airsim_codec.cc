#include "simulator_bridge/airsim/airsim_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"

namespace convoy::sim {
namespace airsim {
namespace {

absl::Status BadCast() { return absl::InvalidArgumentError(kBadCast); }

bool AsDouble(const msgpack::object& o, double* v) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      *v = static_cast<double>(o.via.u64);
      return true;
    case msgpack::type::NEGATIVE_INTEGER:
      *v = static_cast<double>(o.via.i64);
      return true;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      *v = o.via.f64;
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string UnknownMethodError(absl::string_view method, size_t arg_count) {
  return absl::StrCat("rpclib: server could not find function '", method, "' with argument count ",
                      arg_count, ".");
}

std::string ArityError(absl::string_view method, size_t expected, size_t got) {
  return absl::StrCat("rpclib: client error C0002: Function '", method,
                      "' was called with an invalid number of arguments. Expected: ", expected,
                      ", got: ", got);
}

std::string HandlerError(absl::string_view method, size_t arg_count, absl::string_view what) {
  return absl::StrCat(
      "rpclib: function '", method, "' (called with ", arg_count,
      " arg(s)) threw an exception. The exception contained this information: ", what, ".");
}

absl::Status Read(const msgpack::object& o, bool* v) {
  if (o.type != msgpack::type::BOOLEAN) return BadCast();
  *v = o.via.boolean;
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, float* v) {
  double d;
  if (!AsDouble(o, &d)) return BadCast();
  *v = static_cast<float>(d);
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, double* v) {
  if (!AsDouble(o, v)) return BadCast();
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, int32_t* v) {
  if (o.type == msgpack::type::POSITIVE_INTEGER &&
      o.via.u64 <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    *v = static_cast<int32_t>(o.via.u64);
    return absl::OkStatus();
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER &&
      o.via.i64 >= std::numeric_limits<int32_t>::min()) {
    *v = static_cast<int32_t>(o.via.i64);
    return absl::OkStatus();
  }
  return BadCast();
}

absl::Status Read(const msgpack::object& o, uint32_t* v) {
  if (o.type != msgpack::type::POSITIVE_INTEGER ||
      o.via.u64 > std::numeric_limits<uint32_t>::max()) {
    return BadCast();
  }
  *v = static_cast<uint32_t>(o.via.u64);
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, uint64_t* v) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return BadCast();
  *v = o.via.u64;
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, std::string* v) {
  if (o.type == msgpack::type::STR) {
    v->assign(o.via.str.ptr, o.via.str.size);
  } else if (o.type == msgpack::type::BIN) {
    v->assign(o.via.bin.ptr, o.via.bin.size);
  } else {
    return BadCast();
  }
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, ImageType* v) {
  int32_t i = 0;
  CONVOY_RETURN_IF_ERROR(Read(o, &i));
  *v = static_cast<ImageType>(i);
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, std::vector<uint8_t>* v) {
  if (o.type == msgpack::type::BIN) {
    v->assign(o.via.bin.ptr, o.via.bin.ptr + o.via.bin.size);
  } else if (o.type == msgpack::type::STR) {
    v->assign(o.via.str.ptr, o.via.str.ptr + o.via.str.size);
  } else if (o.type == msgpack::type::ARRAY) {
    v->resize(o.via.array.size);
    for (uint32_t i = 0; i < o.via.array.size; ++i) {
      const msgpack::object& e = o.via.array.ptr[i];
      if (e.type != msgpack::type::POSITIVE_INTEGER || e.via.u64 > 255) return BadCast();
      (*v)[i] = static_cast<uint8_t>(e.via.u64);
    }
  } else if (o.type == msgpack::type::NIL) {
    v->clear();
  } else {
    return BadCast();
  }
  return absl::OkStatus();
}

absl::Status Read(const msgpack::object& o, std::vector<float>* v) {
  if (o.type == msgpack::type::NIL) {
    v->clear();
    return absl::OkStatus();
  }
  if (o.type != msgpack::type::ARRAY) return BadCast();
  v->resize(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    CONVOY_RETURN_IF_ERROR(Read(o.via.array.ptr[i], &(*v)[i]));
  }
  return absl::OkStatus();
}

void Write(Packer& pk, bool v) { v ? pk.pack_true() : pk.pack_false(); }
void Packer::PackFloat32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const char bytes[5] = {static_cast<char>(0xca), static_cast<char>(bits >> 24),
                         static_cast<char>(bits >> 16), static_cast<char>(bits >> 8),
                         static_cast<char>(bits)};
  buffer_.write(bytes, sizeof(bytes));
}

void Packer::PackFloat64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  char bytes[9];
  bytes[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buffer_.write(bytes, sizeof(bytes));
}

void Write(Packer& pk, float v) { pk.PackFloat32(v); }
void Write(Packer& pk, double v) { pk.PackFloat64(v); }
void Write(Packer& pk, int32_t v) { pk.pack_int32(v); }
void Write(Packer& pk, uint32_t v) { pk.pack_uint32(v); }
void Write(Packer& pk, uint64_t v) { pk.pack_uint64(v); }
void Write(Packer& pk, absl::string_view v) {
  pk.pack_str(static_cast<uint32_t>(v.size()));
  pk.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
}
void Write(Packer& pk, ImageType v) { pk.pack_int32(static_cast<int32_t>(v)); }
void Write(Packer& pk, const std::vector<uint8_t>& v) {
  pk.pack_bin(static_cast<uint32_t>(v.size()));
  pk.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(v.size()));
}
void Write(Packer& pk, const std::vector<float>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (float f : v) pk.PackFloat32(f);
}

}  // namespace airsim
}  // namespace convoy::sim
