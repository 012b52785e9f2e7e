#include "param_server/core/push_assembler.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"
#include "common/wire/wire_encoding.h"

namespace convoy::ps {

PushAssembler::PushAssembler(std::string fingerprint, size_t parameter_count,
                             std::vector<float> buffer)
    : fingerprint_(std::move(fingerprint)),
      parameter_count_(parameter_count),
      values_(std::move(buffer)) {
  // A buffer of another size is not kept; a fresh one is sized once the header proved the push is for
  // this model. A model-sized one is used as it is: every element is written before Finish() succeeds.
  if (values_.size() != parameter_count_) values_ = std::vector<float>();
}

absl::Status PushAssembler::Fail(v1::RejectReason reason, absl::Status status) {
  failed_ = true;
  reason_ = reason;
  return status;
}

absl::Status PushAssembler::ReadHeader(const v1::GradientChunk& chunk) {
  if (chunk.model_fingerprint() != fingerprint_) {
    return Fail(v1::REJECT_REASON_FINGERPRINT_MISMATCH,
                absl::FailedPreconditionError(absl::StrCat(
                    "model fingerprint mismatch: push has '",
                    chunk.model_fingerprint().empty() ? "(none)" : chunk.model_fingerprint(),
                    "', server has '", fingerprint_, "'")));
  }
  absl::StatusOr<TensorEncoding> encoding =
      FromWireEncoding(chunk.encoding(), UnspecifiedEncoding::kRefused);
  if (!encoding.ok()) return Fail(v1::REJECT_REASON_UNKNOWN_ENCODING, encoding.status());
  encoding_ = *encoding;
  if (chunk.total_elements() != parameter_count_) {
    return Fail(v1::REJECT_REASON_WRONG_SIZE,
                absl::InvalidArgumentError(absl::StrCat("push declares ", chunk.total_elements(),
                                                        " elements, the model has ",
                                                        parameter_count_)));
  }
  if (chunk.minibatch_count() == 0) {
    return Fail(v1::REJECT_REASON_INVALID,
                absl::InvalidArgumentError("minibatch_count must be at least 1"));
  }
  if (chunk.sequence() != 0 && chunk.push_session() == 0) {
    return Fail(v1::REJECT_REASON_INVALID,
                absl::InvalidArgumentError("sequence is set but push_session is 0"));
  }
  wire_encoding_ = chunk.encoding();
  header_.agent_id = chunk.agent_id();
  header_.base_version = chunk.base_version();
  header_.minibatch_count = chunk.minibatch_count();
  header_.base_incarnation = chunk.base_incarnation();
  header_.push_session = chunk.push_session();
  header_.sequence = chunk.sequence();
  values_.resize(parameter_count_);  // A no-op for a reused buffer: no allocation, no zeroing.
  return absl::OkStatus();
}

absl::Status PushAssembler::Add(const v1::GradientChunk& chunk, const TensorBytes& data) {
  if (failed_) return absl::FailedPreconditionError("push already rejected");
  if (chunks_ == 0) {
    CONVOY_RETURN_IF_ERROR(ReadHeader(chunk));
  } else {
    // Later chunks may repeat the header; if they do, it must not change.
    auto differs = [](const auto& got, const auto& want) {
      using T = std::decay_t<decltype(got)>;
      return got != T() && got != want;
    };
    if (differs(chunk.model_fingerprint(), fingerprint_) ||
        differs(chunk.encoding(), wire_encoding_) ||
        differs(chunk.total_elements(), static_cast<uint64_t>(parameter_count_)) ||
        differs(chunk.agent_id(), header_.agent_id) ||
        differs(chunk.base_version(), header_.base_version) ||
        differs(chunk.minibatch_count(), header_.minibatch_count) ||
        differs(chunk.base_incarnation(), header_.base_incarnation) ||
        differs(chunk.push_session(), header_.push_session) ||
        differs(chunk.sequence(), header_.sequence)) {
      return Fail(v1::REJECT_REASON_INVALID,
                  absl::InvalidArgumentError(
                      absl::StrCat("chunk ", chunks_, " changes a header field of the push")));
    }
  }
  ++chunks_;
  if (data.size() > kMaxChunkPayloadBytes) {
    return Fail(v1::REJECT_REASON_BAD_CHUNKS,
                absl::InvalidArgumentError(absl::StrCat("chunk of ", data.size(),
                                                        " bytes exceeds the limit of ",
                                                        kMaxChunkPayloadBytes)));
  }
  if (data.empty()) {
    return Fail(v1::REJECT_REASON_BAD_CHUNKS,
                absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(),
                                                        " carries no data")));
  }
  if (chunk.offset() < next_offset_) {
    return Fail(v1::REJECT_REASON_BAD_CHUNKS,
                absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(),
                                                        " overlaps elements already received up to ",
                                                        next_offset_)));
  }
  if (chunk.offset() > next_offset_) {
    return Fail(v1::REJECT_REASON_BAD_CHUNKS,
                absl::InvalidArgumentError(absl::StrCat("elements [", next_offset_, ", ",
                                                        chunk.offset(), ") are missing")));
  }
  size_t decoded = 0;
  absl::Status s = data.Decode(encoding_, values_.data() + next_offset_,
                               parameter_count_ - next_offset_, &decoded);
  if (!s.ok()) {
    const bool overruns = data.size() % BytesPerElement(encoding_) == 0;
    return Fail(overruns ? v1::REJECT_REASON_WRONG_SIZE : v1::REJECT_REASON_BAD_CHUNKS, s);
  }
  // Checked while the chunk is still in cache, rather than in a pass of its own over the whole tensor.
  all_finite_ = all_finite_ && AllFinite(values_.data() + next_offset_, decoded);
  next_offset_ += decoded;
  return absl::OkStatus();
}

absl::Status PushAssembler::Finish() {
  if (failed_) return absl::FailedPreconditionError("push already rejected");
  if (chunks_ == 0) {
    return Fail(v1::REJECT_REASON_EMPTY, absl::InvalidArgumentError("push stream carried no chunk"));
  }
  if (next_offset_ != parameter_count_) {
    return Fail(v1::REJECT_REASON_BAD_CHUNKS,
                absl::InvalidArgumentError(absl::StrCat("elements [", next_offset_, ", ",
                                                        parameter_count_, ") are missing")));
  }
  if (!all_finite_) {
    return Fail(v1::REJECT_REASON_NON_FINITE,
                absl::InvalidArgumentError("push contains NaN or Inf values"));
  }
  return absl::OkStatus();
}

}  // namespace convoy::ps
