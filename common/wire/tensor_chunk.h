// Zero-copy tensor chunks: convoy.v1's WeightChunk and GradientChunk sent with their `data` field
// taken straight from tensor memory, and received with it left in the slices it arrived in.
//
// The wire format is protobuf's own: an outgoing chunk's bytes are exactly what protobuf's
// serializer writes for the same message with `data` set (fields in number order), so a client or
// server that knows only the .proto reads and writes these chunks unchanged. Only the copies
// differ:
//   - send: fp32 data with a `keep_alive` goes out as a slice that refers to the tensor memory and
//   holds
//     the reference until gRPC has written the bytes; other data is encoded once, into a slice of
//     its own;
//   - receive: the header fields go through protobuf, `data` stays in the received slices, and
//     TensorBytes::Decode writes the elements to their destination — the one copy.
// gRPC picks these up through grpc::SerializationTraits, specialised at the end of this file.
#ifndef CONVOY_COMMON_WIRE_TENSOR_CHUNK_H_
#define CONVOY_COMMON_WIRE_TENSOR_CHUNK_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/wire/tensor_encoding.h"

namespace convoy {
namespace tensor_chunk_internal {

// The number of Message's `data` field.
int DataFieldNumber(const google::protobuf::Descriptor* descriptor);

grpc::Status Serialize(const google::protobuf::Message& header, int data_field, const float* values,
                       size_t count, TensorEncoding encoding,
                       const std::shared_ptr<const void>& keep_alive, grpc::ByteBuffer* out);
size_t ByteSize(const google::protobuf::Message& header, int data_field, size_t count,
                TensorEncoding encoding);
absl::Status Parse(grpc::ByteBuffer* buffer, int data_field, google::protobuf::Message* header,
                   std::vector<grpc::Slice>* slices, TensorBytes* data);

}  // namespace tensor_chunk_internal

// The number of Message's `data` field, looked up once.
template <typename Message>
int DataField() {
  static const int number = tensor_chunk_internal::DataFieldNumber(Message::descriptor());
  return number;
}

// A chunk to send: `header` holds every field but data (which must be empty); data carries `count`
// elements of `values` in `encoding`.
template <typename Message>
struct OutgoingChunk {
  Message header;
  const float* values = nullptr;
  size_t count = 0;
  TensorEncoding encoding = TensorEncoding::kFp32;
  // When set, fp32 data is not copied: the sent slice refers to `values` and owns a copy of this
  // reference until gRPC is done with the bytes, which may be after Write() returned. Leave it
  // empty when nothing keeps `values` alive that long; the data is then encoded into a slice of
  // gRPC's.
  std::shared_ptr<const void> keep_alive;

  // The serialised size in bytes.
  size_t ByteSize() const {
    return tensor_chunk_internal::ByteSize(header, DataField<Message>(), count, encoding);
  }
};

// A received chunk. Reusable: each Parse replaces what the last one held.
template <typename Message>
class IncomingChunk {
 public:
  // Takes `buffer`'s slices (it is left empty). On error, parse_error() says what was wrong with
  // the bytes; gRPC then ends the read.
  absl::Status Parse(grpc::ByteBuffer* buffer) {
    parse_error_ =
        tensor_chunk_internal::Parse(buffer, DataField<Message>(), &header_, &slices_, &data_);
    return parse_error_;
  }

  // Every field but data.
  const Message& header() const { return header_; }
  // data's bytes, in the received slices; valid until the next Parse.
  const TensorBytes& data() const { return data_; }
  // The status of the last Parse.
  const absl::Status& parse_error() const { return parse_error_; }
  // The size of the last parsed message on the wire.
  size_t wire_bytes() const {
    size_t bytes = 0;
    for (const grpc::Slice& slice : slices_) bytes += slice.size();
    return bytes;
  }

 private:
  Message header_;
  std::vector<grpc::Slice> slices_;
  TensorBytes data_;
  absl::Status parse_error_;
};

}  // namespace convoy

namespace grpc {

template <typename Message>
class SerializationTraits<convoy::OutgoingChunk<Message>, void> {
 public:
  static Status Serialize(const convoy::OutgoingChunk<Message>& chunk, ByteBuffer* buffer,
                          bool* own_buffer) {
    *own_buffer = true;
    return convoy::tensor_chunk_internal::Serialize(chunk.header, convoy::DataField<Message>(),
                                                    chunk.values, chunk.count, chunk.encoding,
                                                    chunk.keep_alive, buffer);
  }
};

template <typename Message>
class SerializationTraits<convoy::IncomingChunk<Message>, void> {
 public:
  static Status Deserialize(ByteBuffer* buffer, convoy::IncomingChunk<Message>* chunk) {
    const absl::Status parsed = chunk->Parse(buffer);
    if (parsed.ok()) return Status::OK;
    return Status(StatusCode::INTERNAL, std::string(parsed.message()));
  }
};

}  // namespace grpc

#endif  // CONVOY_COMMON_WIRE_TENSOR_CHUNK_H_
