// msgpack encoding of AirSim's structs and msgpack-rpc framing, shared by AirSimClient and the
// convoy_sim server (AirSimServer). See AIRSIM_PROTOCOL.md:
// - a struct is written as a map of its field names, in declaration order, exactly those keys;
// - a struct is read from a map by key name (missing keys keep defaults, extra keys are ignored),
//   or from a positional array (Colosseum 2.3+);
// - leniency on reading: float/double accept any msgpack number, strings accept str or bin,
//   integers accept only integers, bools only bools. A mismatch is INVALID_ARGUMENT
//   "std::bad_cast", the text rpclib puts in its error when conversion fails.
#ifndef CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CODEC_H_
#define CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CODEC_H_

#include <cstdint>
#include <msgpack.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/world/car_sim.h"

namespace convoy::sim {
namespace airsim {

// msgpack-cxx 4 writes a float with an integral value (0.0f, 1.0f) as an integer; AirSim's
// msgpack (and its Python client's struct decoding) expects float32 and float64 exactly, so floats
// go through PackFloat32/PackFloat64, which always write the float formats.
class Packer : public msgpack::packer<msgpack::sbuffer> {
 public:
  explicit Packer(msgpack::sbuffer& buffer)
      : msgpack::packer<msgpack::sbuffer>(buffer), buffer_(buffer) {}
  void PackFloat32(float v);
  void PackFloat64(double v);

 private:
  msgpack::sbuffer& buffer_;
};

inline constexpr int kProtocolVersion = 1;
inline constexpr int kDefaultPort = 41451;
inline constexpr char kDefaultVehicleName[] = "PhysXCar";
inline constexpr char kBadCast[] = "std::bad_cast";

// msgpack-rpc message types.
inline constexpr int kRequest = 0;
inline constexpr int kResponse = 1;
inline constexpr int kNotification = 2;

// rpclib's error strings, byte for byte.
std::string UnknownMethodError(absl::string_view method, size_t arg_count);
std::string ArityError(absl::string_view method, size_t expected, size_t got);
std::string HandlerError(absl::string_view method, size_t arg_count, absl::string_view what);

// Field lists: one visitor call per field, in wire order.
template <typename V>
void VisitFields(Vector3r& s, V&& v) {
  v("x_val", s.x_val);
  v("y_val", s.y_val);
  v("z_val", s.z_val);
}
template <typename V>
void VisitFields(Quaternionr& s, V&& v) {
  v("w_val", s.w_val);
  v("x_val", s.x_val);
  v("y_val", s.y_val);
  v("z_val", s.z_val);
}
template <typename V>
void VisitFields(Pose& s, V&& v) {
  v("position", s.position);
  v("orientation", s.orientation);
}
template <typename V>
void VisitFields(KinematicsState& s, V&& v) {
  v("position", s.position);
  v("orientation", s.orientation);
  v("linear_velocity", s.linear_velocity);
  v("angular_velocity", s.angular_velocity);
  v("linear_acceleration", s.linear_acceleration);
  v("angular_acceleration", s.angular_acceleration);
}
template <typename V>
void VisitFields(CollisionInfo& s, V&& v) {
  v("has_collided", s.has_collided);
  v("penetration_depth", s.penetration_depth);
  v("time_stamp", s.time_stamp);
  v("normal", s.normal);
  v("impact_point", s.impact_point);
  v("position", s.position);
  v("object_name", s.object_name);
  v("object_id", s.object_id);
}
template <typename V>
void VisitFields(CarControls& s, V&& v) {
  v("throttle", s.throttle);
  v("steering", s.steering);
  v("brake", s.brake);
  v("handbrake", s.handbrake);
  v("is_manual_gear", s.is_manual_gear);
  v("manual_gear", s.manual_gear);
  v("gear_immediate", s.gear_immediate);
}
template <typename V>
void VisitFields(CarState& s, V&& v) {
  v("speed", s.speed);
  v("gear", s.gear);
  v("rpm", s.rpm);
  v("maxrpm", s.maxrpm);
  v("handbrake", s.handbrake);
  v("kinematics_estimated", s.kinematics_estimated);
  v("timestamp", s.timestamp);
}
template <typename V>
void VisitFields(ImageRequest& s, V&& v) {
  v("camera_name", s.camera_name);
  v("image_type", s.image_type);
  v("pixels_as_float", s.pixels_as_float);
  v("compress", s.compress);
}
template <typename V>
void VisitFields(ImageResponse& s, V&& v) {
  v("image_data_uint8", s.image_data_uint8);
  v("image_data_float", s.image_data_float);
  v("camera_position", s.camera_position);
  v("camera_name", s.camera_name);
  v("camera_orientation", s.camera_orientation);
  v("time_stamp", s.time_stamp);
  v("message", s.message);
  v("pixels_as_float", s.pixels_as_float);
  v("compress", s.compress);
  v("width", s.width);
  v("height", s.height);
  v("image_type", s.image_type);
}

template <typename T>
struct IsWireStruct : std::false_type {};
template <>
struct IsWireStruct<Vector3r> : std::true_type {};
template <>
struct IsWireStruct<Quaternionr> : std::true_type {};
template <>
struct IsWireStruct<Pose> : std::true_type {};
template <>
struct IsWireStruct<KinematicsState> : std::true_type {};
template <>
struct IsWireStruct<CollisionInfo> : std::true_type {};
template <>
struct IsWireStruct<CarControls> : std::true_type {};
template <>
struct IsWireStruct<CarState> : std::true_type {};
template <>
struct IsWireStruct<ImageRequest> : std::true_type {};
template <>
struct IsWireStruct<ImageResponse> : std::true_type {};

// Leaf readers.
absl::Status Read(const msgpack::object& o, bool* v);
absl::Status Read(const msgpack::object& o, float* v);
absl::Status Read(const msgpack::object& o, double* v);
absl::Status Read(const msgpack::object& o, int32_t* v);
absl::Status Read(const msgpack::object& o, uint32_t* v);
absl::Status Read(const msgpack::object& o, uint64_t* v);
absl::Status Read(const msgpack::object& o, std::string* v);
absl::Status Read(const msgpack::object& o, ImageType* v);
absl::Status Read(const msgpack::object& o, std::vector<uint8_t>* v);  // bin, str or int array
absl::Status Read(const msgpack::object& o, std::vector<float>* v);

template <typename T>
std::enable_if_t<IsWireStruct<T>::value, absl::Status> Read(const msgpack::object& o, T* s) {
  absl::Status status;
  if (o.type == msgpack::type::MAP) {
    const msgpack::object_kv* kv = o.via.map.ptr;
    for (uint32_t i = 0; i < o.via.map.size && status.ok(); ++i) {
      const msgpack::object& key = kv[i].key;
      if (key.type != msgpack::type::STR && key.type != msgpack::type::BIN) continue;
      const absl::string_view name(key.via.str.ptr, key.via.str.size);
      VisitFields(*s, [&](const char* field, auto& value) {
        if (status.ok() && name == field) status = Read(kv[i].val, &value);
      });
    }
    return status;
  }
  if (o.type == msgpack::type::ARRAY) {
    uint32_t index = 0;
    VisitFields(*s, [&](const char*, auto& value) {
      if (status.ok() && index < o.via.array.size) status = Read(o.via.array.ptr[index], &value);
      ++index;
    });
    return status;
  }
  return absl::InvalidArgumentError(kBadCast);
}

template <typename T>
absl::Status Read(const msgpack::object& o, std::vector<T>* v,
                  std::enable_if_t<IsWireStruct<T>::value, int> = 0) {
  if (o.type != msgpack::type::ARRAY) return absl::InvalidArgumentError(kBadCast);
  v->resize(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    CONVOY_RETURN_IF_ERROR(Read(o.via.array.ptr[i], &(*v)[i]));
  }
  return absl::OkStatus();
}

// Leaf writers.
void Write(Packer& pk, bool v);
void Write(Packer& pk, float v);
void Write(Packer& pk, double v);
void Write(Packer& pk, int32_t v);
void Write(Packer& pk, uint32_t v);
void Write(Packer& pk, uint64_t v);
void Write(Packer& pk, absl::string_view v);
inline void Write(Packer& pk, const std::string& v) { Write(pk, absl::string_view(v)); }
inline void Write(Packer& pk, const char* v) { Write(pk, absl::string_view(v)); }
void Write(Packer& pk, ImageType v);
void Write(Packer& pk, const std::vector<uint8_t>& v);  // bin
void Write(Packer& pk, const std::vector<float>& v);    // array of float32

template <typename T>
std::enable_if_t<IsWireStruct<T>::value> Write(Packer& pk, const T& s) {
  T& mutable_s = const_cast<T&>(s);  // VisitFields takes T&; writing does not modify.
  uint32_t count = 0;
  VisitFields(mutable_s, [&](const char*, auto&) { ++count; });
  pk.pack_map(count);
  VisitFields(mutable_s, [&](const char* field, auto& value) {
    Write(pk, absl::string_view(field));
    Write(pk, static_cast<const std::decay_t<decltype(value)>&>(value));
  });
}

template <typename T>
std::enable_if_t<IsWireStruct<T>::value> Write(Packer& pk, const std::vector<T>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (const T& item : v) Write(pk, item);
}

}  // namespace airsim
}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CODEC_H_
