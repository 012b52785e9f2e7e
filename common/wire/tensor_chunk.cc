#include "common/wire/tensor_chunk.h"

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpc/slice.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace tensor_chunk_internal {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

using google::protobuf::internal::WireFormatLite;

uint32_t DataTag(int data_field) {
  return WireFormatLite::MakeTag(data_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

// The header's fields before `data` and after it, each serialised as protobuf does (in number
// order).
void SerializeAround(const google::protobuf::Message& header, int data_field, std::string* before,
                     std::string* after) {
  const google::protobuf::Reflection* reflection = header.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(header, &fields);
  bool any_after = false;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    CHECK_NE(field->number(), data_field) << "an OutgoingChunk's header must leave data empty";
    any_after = any_after || field->number() > data_field;
  }
  if (!any_after) {
    header.AppendToString(before);
    return;
  }
  std::unique_ptr<google::protobuf::Message> low(header.New());
  std::unique_ptr<google::protobuf::Message> high(header.New());
  low->CopyFrom(header);
  high->CopyFrom(header);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    reflection->ClearField(field->number() < data_field ? high.get() : low.get(), field);
  }
  low->AppendToString(before);
  high->AppendToString(after);
}

void ReleaseKeepAlive(void* reference) {
  delete static_cast<std::shared_ptr<const void>*>(reference);
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed chunk: ", what));
}

// Where one occurrence of data lies in the message.
struct Cut {
  int length_begin;  // Where data's length varint starts,
  int payload_end;   // and where its payload ends.
};

// Reads one occurrence of data (its tag just read) into `data`, replacing what it held: the last
// occurrence of a field wins, as protobuf parses it.
absl::Status ReadData(CodedInputStream& in, TensorBytes* data, Cut* cut) {
  cut->length_begin = in.CurrentPosition();
  uint32_t length = 0;
  // As protobuf reads a length: at most 5 bytes, under 2 GiB.
  if (!in.ReadVarint32(&length) || in.CurrentPosition() - cut->length_begin > 5 ||
      length > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return Malformed("data's length");
  }
  data->Clear();
  while (length > 0) {
    const void* piece = nullptr;
    int available = 0;
    if (!in.GetDirectBufferPointer(&piece, &available) || available <= 0) {
      return Malformed(absl::StrCat("data is ", length, " bytes short"));
    }
    const uint32_t take = std::min<uint32_t>(length, static_cast<uint32_t>(available));
    data->Append(absl::string_view(static_cast<const char*>(piece), take));
    in.Skip(static_cast<int>(take));
    length -= take;
  }
  cut->payload_end = in.CurrentPosition();
  return absl::OkStatus();
}

// Walks the fields (WireFormatLite::SkipField, protobuf's own) to find each occurrence of data.
// Nothing is interpreted besides: protobuf parses the header, which is the message's own bytes
// with each data payload left out and its length replaced by 0, so its rules (tags, lengths,
// groups, UTF-8, unknown fields) apply as they would to the whole message.
absl::Status FindData(CodedInputStream& in, int data_field, TensorBytes* data,
                      std::vector<Cut>* cuts) {
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (tag != DataTag(data_field)) {
      if (!WireFormatLite::SkipField(&in, tag)) {
        return Malformed(absl::StrCat("field ", tag >> 3, " (wire type ", tag & 7,
                                      ") is cut short or malformed"));
      }
      continue;
    }
    Cut cut;
    CONVOY_RETURN_IF_ERROR(ReadData(in, data, &cut));
    cuts->push_back(cut);
  }
  if (!in.ConsumedEntireMessage()) return Malformed("an invalid field tag");
  return absl::OkStatus();
}

// Appends message bytes [from, to), across the slices, to `out`.
void AppendMessageBytes(const std::vector<grpc::Slice>& slices, int from, int to,
                        std::string* out) {
  int start = 0;
  for (const grpc::Slice& slice : slices) {
    const int end = start + static_cast<int>(slice.size());
    const int a = std::max(from, start);
    const int b = std::min(to, end);
    if (a < b) {
      out->append(reinterpret_cast<const char*>(slice.begin()) + (a - start),
                  static_cast<size_t>(b - a));
    }
    start = end;
  }
}

// The header: every byte of the message's first `size` but the cuts, a 0 in place of each length.
std::string HeaderBytes(const std::vector<grpc::Slice>& slices, const std::vector<Cut>& cuts,
                        int size) {
  std::string header_bytes;
  int position = 0;
  for (const Cut& cut : cuts) {
    AppendMessageBytes(slices, position, cut.length_begin, &header_bytes);
    header_bytes.push_back('\0');
    position = cut.payload_end;
  }
  AppendMessageBytes(slices, position, size, &header_bytes);
  return header_bytes;
}

}  // namespace

int DataFieldNumber(const google::protobuf::Descriptor* descriptor) {
  const google::protobuf::FieldDescriptor* data = descriptor->FindFieldByName("data");
  CHECK(data != nullptr && data->type() == google::protobuf::FieldDescriptor::TYPE_BYTES)
      << descriptor->full_name() << " has no bytes field named data";
  return data->number();
}

size_t ByteSize(const google::protobuf::Message& header, int data_field, size_t count,
                TensorEncoding encoding) {
  const size_t bytes = count * BytesPerElement(encoding);
  if (bytes == 0) return header.ByteSizeLong();
  return header.ByteSizeLong() + CodedOutputStream::VarintSize32(DataTag(data_field)) +
         CodedOutputStream::VarintSize64(bytes) + bytes;
}

grpc::Status Serialize(const google::protobuf::Message& header, int data_field, const float* values,
                       size_t count, TensorEncoding encoding,
                       const std::shared_ptr<const void>& keep_alive, grpc::ByteBuffer* out) {
  const size_t bytes = count * BytesPerElement(encoding);
  if (bytes > std::numeric_limits<uint32_t>::max()) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("chunk data of ", bytes, " bytes is over protobuf's limit"));
  }
  std::string before;
  std::string after;
  SerializeAround(header, data_field, &before, &after);
  grpc::Slice slices[3];
  size_t n = 0;
  if (bytes > 0) {
    {
      StringOutputStream stream(&before);  // Appends.
      CodedOutputStream coded(&stream);
      coded.WriteTag(DataTag(data_field));
      coded.WriteVarint32(static_cast<uint32_t>(bytes));
    }
    slices[n++] = grpc::Slice(before);
    if (keep_alive != nullptr && encoding == TensorEncoding::kFp32) {
      slices[n++] = grpc::Slice(const_cast<float*>(values), bytes, &ReleaseKeepAlive,
                                new std::shared_ptr<const void>(keep_alive));
    } else {
      grpc_slice encoded = grpc_slice_malloc(bytes);
      EncodeTensorTo(values, count, encoding,
                     reinterpret_cast<char*>(GRPC_SLICE_START_PTR(encoded)));
      slices[n++] = grpc::Slice(encoded, grpc::Slice::STEAL_REF);
    }
  } else {
    slices[n++] = grpc::Slice(before);
  }
  if (!after.empty()) slices[n++] = grpc::Slice(after);
  *out = grpc::ByteBuffer(slices, n);
  return grpc::Status::OK;
}

absl::Status Parse(grpc::ByteBuffer* buffer, int data_field, google::protobuf::Message* header,
                   std::vector<grpc::Slice>* slices, TensorBytes* data) {
  data->Clear();
  header->Clear();
  slices->clear();
  const grpc::Status dumped = buffer->Dump(slices);
  buffer->Clear();
  if (!dumped.ok())
    return absl::InternalError(absl::StrCat("reading a chunk: ", dumped.error_message()));

  // One stream over the slices, read in place: GetDirectBufferPointer points into the slices
  // themselves, which `slices` keeps alive (and, for a small slice stored inline, at a fixed
  // address).
  std::deque<google::protobuf::io::ArrayInputStream> arrays;
  std::vector<google::protobuf::io::ZeroCopyInputStream*> streams;
  for (const grpc::Slice& slice : *slices) {
    if (slice.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return Malformed("a slice over 2 GiB");
    }
    arrays.emplace_back(slice.begin(), static_cast<int>(slice.size()));
    streams.push_back(&arrays.back());
  }
  google::protobuf::io::ConcatenatingInputStream joined(streams.data(),
                                                        static_cast<int>(streams.size()));
  CodedInputStream in(&joined);
  std::vector<Cut> cuts;
  CONVOY_RETURN_IF_ERROR(FindData(in, data_field, data, &cuts));
  if (!header->ParseFromString(HeaderBytes(*slices, cuts, in.CurrentPosition()))) {
    return Malformed("the header fields do not parse");
  }
  return absl::OkStatus();
}

}  // namespace tensor_chunk_internal
}  // namespace convoy
