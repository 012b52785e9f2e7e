// PushAssembler: validates a PushGradients stream chunk by chunk and decodes it into one flat fp32 tensor.
#ifndef CONVOY_PARAM_SERVER_CORE_PUSH_ASSEMBLER_H_
#define CONVOY_PARAM_SERVER_CORE_PUSH_ASSEMBLER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/wire/tensor_encoding.h"
#include "convoy/v1/parameter_server.pb.h"

namespace convoy::ps {

// What a push says about itself besides its tensor: the header of its first GradientChunk.
struct PushHeader {
  std::string agent_id;
  uint64_t base_version = 0;
  uint32_t minibatch_count = 1;
  uint64_t base_incarnation = 0;  // The incarnation base_version belongs to; 0: unknown, not checked.
  uint64_t push_session = 0;      // Names the sequence space; 0 with sequence 0 (an older client).
  uint64_t sequence = 0;          // Per push_session, the same on every retry; 0: no repeat detection.
};

// One per stream; not thread-safe. Memory is bounded by the model: the tensor is allocated only after the
// first chunk's header proved the push is for this model and of its size.
class PushAssembler {
 public:
  // `buffer` is storage for the tensor to reuse (a pushed tensor is model-sized); its contents do not matter.
  PushAssembler(std::string fingerprint, size_t parameter_count, std::vector<float> buffer = {});

  // Validates and decodes one chunk. Errors (and reason() afterwards):
  //   FAILED_PRECONDITION  FINGERPRINT_MISMATCH, naming both fingerprints;
  //   INVALID_ARGUMENT     UNKNOWN_ENCODING, WRONG_SIZE, BAD_CHUNKS (overlap, gap, oversized, ragged bytes),
  //                        INVALID (a header field that changes between chunks, minibatch_count 0,
  //                        a sequence without a push_session).
  // After an error the assembler accepts nothing more.
  absl::Status Add(const v1::GradientChunk& chunk) { return Add(chunk, TensorBytes(chunk.data())); }
  // The same for a chunk whose data is elsewhere (in the received slices); `header`'s own data is ignored.
  absl::Status Add(const v1::GradientChunk& header, const TensorBytes& data);

  // Completes the push. Errors: EMPTY (no chunk), BAD_CHUNKS (elements missing at the end), NON_FINITE.
  absl::Status Finish();

  v1::RejectReason reason() const { return reason_; }
  const PushHeader& header() const { return header_; }
  const std::string& agent_id() const { return header_.agent_id; }
  uint64_t base_version() const { return header_.base_version; }
  uint32_t minibatch_count() const { return header_.minibatch_count; }
  size_t chunks() const { return chunks_; }
  // The decoded tensor, complete once Finish() succeeded.
  std::vector<float>& values() { return values_; }
  // The tensor's storage, for the next assembler; this one is done.
  std::vector<float> TakeBuffer() { return std::move(values_); }

 private:
  absl::Status Fail(v1::RejectReason reason, absl::Status status);
  absl::Status ReadHeader(const v1::GradientChunk& chunk);

  std::string fingerprint_;
  size_t parameter_count_;
  v1::RejectReason reason_ = v1::REJECT_REASON_UNSPECIFIED;
  bool failed_ = false;
  size_t chunks_ = 0;
  PushHeader header_;
  v1::Encoding wire_encoding_ = v1::ENCODING_UNSPECIFIED;
  TensorEncoding encoding_ = TensorEncoding::kFp32;
  size_t next_offset_ = 0;
  bool all_finite_ = true;  // Of the elements decoded so far.
  std::vector<float> values_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_PUSH_ASSEMBLER_H_
