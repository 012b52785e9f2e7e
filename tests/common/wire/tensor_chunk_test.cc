#include "common/wire/tensor_chunk.h"

#include <grpcpp/support/byte_buffer.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "convoy/v1/parameter_server.pb.h"
#include "tests/catch.h"

namespace convoy {
namespace {

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = scale * (static_cast<float>(i) - 0.37f * n);
  return values;
}

template <typename Message>
std::string Bytes(const OutgoingChunk<Message>& chunk) {
  grpc::ByteBuffer buffer;
  bool own = false;
  REQUIRE(grpc::SerializationTraits<OutgoingChunk<Message>>::Serialize(chunk, &buffer, &own).ok());
  CHECK(own);
  grpc::Slice whole;
  REQUIRE(buffer.DumpToSingleSlice(&whole).ok());
  return std::string(reinterpret_cast<const char*>(whole.begin()), whole.size());
}

// The same message as protobuf serialises it, data encoded the plain way.
template <typename Message>
std::string PlainBytes(const OutgoingChunk<Message>& chunk) {
  Message message = chunk.header;
  EncodeTensor(chunk.values, chunk.count, chunk.encoding, message.mutable_data());
  return message.SerializeAsString();
}

v1::GradientChunk FullGradientHeader() {
  v1::GradientChunk header;
  header.set_agent_id("agent-7");
  header.set_base_version(41);
  header.set_encoding(v1::ENCODING_FP32);
  header.set_offset(262144);
  header.set_minibatch_count(4);
  header.set_model_fingerprint("cookbook-0123456789abcdef");
  header.set_total_elements(903941);
  header.set_base_incarnation(0xfeedface12345678ull);
  header.set_push_session(99);
  header.set_sequence(1234567);
  return header;
}

// A byte buffer of `bytes` cut into slices at random places, small ones (stored inline by gRPC)
// among them.
grpc::ByteBuffer Sliced(const std::string& bytes, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1 + random() % (random() % 2 ? 7 : 5000));
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST_CASE("A zero-copy chunk's bytes are exactly protobuf's for the same message",
          "[tensor_chunk]") {
  const std::vector<float> values = Ramp(1001, 0.125f);
  auto keep = std::make_shared<std::vector<float>>(values);
  for (TensorEncoding encoding : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    for (bool referenced : {false, true}) {
      CAPTURE(static_cast<int>(encoding), referenced);
      OutgoingChunk<v1::WeightChunk> pull;
      pull.header.set_version(17);
      pull.header.set_offset(5);
      pull.header.set_total_elements(70000);  // Fields after data (3) ...
      pull.header.set_network(v1::NETWORK_TARGET);
      pull.header.set_incarnation(3);
      pull.values = keep->data();
      pull.count = keep->size();
      pull.encoding = encoding;
      if (referenced) pull.keep_alive = keep;
      CHECK(Bytes(pull) == PlainBytes(pull));
      CHECK(pull.ByteSize() == PlainBytes(pull).size());

      pull.header.clear_total_elements();  // ... and none after it.
      pull.header.clear_network();
      pull.header.clear_incarnation();
      CHECK(Bytes(pull) == PlainBytes(pull));

      OutgoingChunk<v1::GradientChunk> push;
      push.header = FullGradientHeader();
      push.values = keep->data() + 1;
      push.count = 999;
      push.encoding = encoding;
      if (referenced) push.keep_alive = keep;
      CHECK(Bytes(push) == PlainBytes(push));
      CHECK(push.ByteSize() == PlainBytes(push).size());
      push.header.Clear();
      push.header.set_offset(2);  // A later chunk of a push: offset and data only.
      CHECK(Bytes(push) == PlainBytes(push));
    }
  }
  OutgoingChunk<v1::WeightChunk> not_newer;  // No data at all.
  not_newer.header.set_version(9);
  not_newer.header.set_not_newer(true);
  CHECK(Bytes(not_newer) == PlainBytes(not_newer));
  CHECK(not_newer.ByteSize() == PlainBytes(not_newer).size());
}

TEST_CASE("A referenced chunk keeps its memory alive until gRPC lets go of the bytes",
          "[tensor_chunk]") {
  auto memory = std::make_shared<std::vector<float>>(Ramp(4096, 1.f));
  const std::vector<float> expected = *memory;
  std::weak_ptr<std::vector<float>> watch = memory;
  OutgoingChunk<v1::WeightChunk> chunk;
  chunk.values = memory->data();
  chunk.count = memory->size();
  chunk.keep_alive = memory;
  auto buffer = std::make_unique<grpc::ByteBuffer>();
  bool own = false;
  REQUIRE(grpc::SerializationTraits<OutgoingChunk<v1::WeightChunk>>::Serialize(chunk, buffer.get(),
                                                                               &own)
              .ok());
  chunk.keep_alive.reset();
  memory.reset();
  REQUIRE_FALSE(watch.expired());  // Only the buffer's slice holds it now.

  // Still the bytes of the memory it refers to: parse them back.
  IncomingChunk<v1::WeightChunk> incoming;
  grpc::ByteBuffer copy(*buffer);  // A second reference to the same slices.
  REQUIRE(incoming.Parse(&copy).ok());
  std::vector<float> out(expected.size());
  size_t decoded = 0;
  REQUIRE(incoming.data().Decode(TensorEncoding::kFp32, out.data(), out.size(), &decoded).ok());
  CHECK(out == expected);
  buffer.reset();
  CHECK_FALSE(watch.expired());  // `incoming` holds the received slices.
  incoming = IncomingChunk<v1::WeightChunk>();
  CHECK(watch.expired());
}

TEST_CASE("A received chunk parses as protobuf does, its data read where it arrived",
          "[tensor_chunk]") {
  const std::vector<float> values = Ramp(20001, 0.5f);
  for (TensorEncoding encoding : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    CAPTURE(static_cast<int>(encoding));
    v1::GradientChunk message = FullGradientHeader();
    message.set_encoding(encoding == TensorEncoding::kBf16 ? v1::ENCODING_BF16 : v1::ENCODING_FP32);
    EncodeTensor(values.data(), values.size(), encoding, message.mutable_data());
    const std::string bytes = message.SerializeAsString();
    std::vector<float> expected(values.size());
    size_t n = 0;
    REQUIRE(DecodeTensor(message.data(), encoding, expected.data(), expected.size(), &n).ok());
    v1::GradientChunk expected_header = message;
    expected_header.clear_data();

    for (uint32_t seed = 1; seed <= 20; ++seed) {
      CAPTURE(seed);
      grpc::ByteBuffer buffer = Sliced(bytes, seed);
      IncomingChunk<v1::GradientChunk> chunk;
      REQUIRE(
          grpc::SerializationTraits<IncomingChunk<v1::GradientChunk>>::Deserialize(&buffer, &chunk)
              .ok());
      CHECK(buffer.Length() == 0);  // Its slices are the chunk's now.
      CHECK(chunk.header().SerializeAsString() == expected_header.SerializeAsString());
      CHECK(chunk.wire_bytes() == bytes.size());
      REQUIRE(chunk.data().size() == message.data().size());
      CHECK(chunk.data().pieces().size() > 1);
      CHECK(chunk.data().ToString() == message.data());
      std::vector<float> out(values.size() + 3, -1.f);
      size_t decoded = 0;
      REQUIRE(chunk.data().Decode(encoding, out.data(), out.size(), &decoded).ok());
      CHECK(decoded == values.size());
      out.resize(decoded);
      CHECK(out == expected);
    }
  }
}

TEST_CASE("A received chunk's data is not copied on the way in", "[tensor_chunk]") {
  v1::WeightChunk message;
  message.set_version(3);
  std::vector<float> values = Ramp(3000, 2.f);
  EncodeTensor(values.data(), values.size(), TensorEncoding::kFp32, message.mutable_data());
  message.set_incarnation(8);
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(
      bytes.data(), bytes.size(), [](void*) {}, nullptr);  // Refers to `bytes`.
  grpc::ByteBuffer buffer(&slice, 1);
  IncomingChunk<v1::WeightChunk> chunk;
  REQUIRE(chunk.Parse(&buffer).ok());
  REQUIRE(chunk.data().pieces().size() == 1);
  const char* piece = chunk.data().pieces()[0].data();
  CHECK(piece > bytes.data());
  CHECK(piece + chunk.data().size() < bytes.data() + bytes.size());
  CHECK(chunk.header().version() == 3);
  CHECK(chunk.header().incarnation() == 8);
}

TEST_CASE("A received chunk takes fields in any order, the last data, and unknown fields",
          "[tensor_chunk]") {
  // data (3) first, then the rest; then data again, which protobuf says replaces the first.
  v1::WeightChunk data_only;
  data_only.set_data(std::string("\x01\x02\x03\x04", 4));
  v1::WeightChunk rest;
  rest.set_version(5);
  rest.set_offset(16);
  rest.set_total_elements(99);
  v1::WeightChunk second_data;
  second_data.set_data(std::string("\x05\x06\x07\x08\x09\x0a\x0b\x0c", 8));
  v1::GradientChunk carrier;         // Its field 9 (base_incarnation) is unknown to a WeightChunk,
  carrier.set_base_incarnation(77);  // which has fields 1 to 8.
  const std::string unknown = carrier.SerializeAsString();
  const std::string group =
      "\x4b\x08\x01\x4c";  // Field 9 as a group holding a varint: unknown too.
  const std::string bytes = data_only.SerializeAsString() + rest.SerializeAsString() + unknown +
                            group + second_data.SerializeAsString();
  v1::WeightChunk parsed_by_protobuf;
  REQUIRE(parsed_by_protobuf.ParseFromString(bytes));
  grpc::ByteBuffer buffer = Sliced(bytes, 3);
  IncomingChunk<v1::WeightChunk> chunk;
  REQUIRE(chunk.Parse(&buffer).ok());
  CHECK(chunk.data().ToString() == parsed_by_protobuf.data());
  v1::WeightChunk header = parsed_by_protobuf;
  header.clear_data();
  CHECK(chunk.header().SerializeAsString() == header.SerializeAsString());
  CHECK(chunk.header().offset() == 16);
}

TEST_CASE("A malformed chunk is an error that names what was wrong", "[tensor_chunk]") {
  v1::WeightChunk message;
  message.set_version(5);
  message.set_data(std::string(64, '\x11'));
  const std::string good = message.SerializeAsString();
  struct Case {
    std::string bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {good.substr(0, good.size() - 10), "data is 10 bytes short"},
      {good.substr(0, 3), "data's length"},
      {std::string("\x08\xff\xff", 3), "field 1 (wire type 0) is cut short"},
      {std::string("\x0b\x00", 2), "field 1 (wire type 3) is cut short"},  // A group never ended.
      {std::string("\x00\x01", 2), "invalid field tag"},                   // Tag 0.
      {std::string("\x12\x05\x01", 3), "field 2 (wire type 2) is cut short"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.says);
    grpc::ByteBuffer buffer = Sliced(c.bytes, 1);
    IncomingChunk<v1::WeightChunk> chunk;
    const absl::Status parsed = chunk.Parse(&buffer);
    CHECK(parsed.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(parsed.message()), Catch::Matchers::ContainsSubstring(c.says));
    CHECK(chunk.parse_error() == parsed);
  }
}

TEST_CASE("Data in pieces decodes as one string would, element boundaries anywhere", "[encoding]") {
  const std::vector<float> values = Ramp(257, 0.75f);
  for (TensorEncoding encoding : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    std::string bytes;
    EncodeTensor(values.data(), values.size(), encoding, &bytes);
    std::vector<float> whole(values.size());
    size_t n = 0;
    REQUIRE(DecodeTensor(bytes, encoding, whole.data(), whole.size(), &n).ok());
    for (size_t cut = 1; cut < 12; ++cut) {
      TensorBytes pieces;
      for (size_t at = 0; at < bytes.size(); at += cut) {
        pieces.Append(absl::string_view(bytes).substr(at, cut));
      }
      std::vector<float> out(values.size());
      size_t decoded = 0;
      REQUIRE(pieces.Decode(encoding, out.data(), out.size(), &decoded).ok());
      CHECK(decoded == values.size());
      CHECK(out == whole);
      // The errors of DecodeTensor, before anything is written.
      std::vector<float> small(values.size() - 1, 42.f);
      CHECK(pieces.Decode(encoding, small.data(), small.size(), &decoded).code() ==
            absl::StatusCode::kInvalidArgument);
      CHECK(small == std::vector<float>(values.size() - 1, 42.f));
      pieces.Append("x");
      CHECK_THAT(std::string(pieces.Decode(encoding, out.data(), out.size(), &decoded).message()),
                 Catch::Matchers::ContainsSubstring("not a whole number"));
    }
  }
}

}  // namespace
}  // namespace convoy
