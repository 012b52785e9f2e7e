// Weights files: a {parameter name: tensor} dictionary in torch.save's format, so Python's torch.load reads
// them (`model.load_state_dict(torch.load(path))`). Checkpoints and agents both write them.
#ifndef CONVOY_COMMON_MODEL_WEIGHTS_FILE_H_
#define CONVOY_COMMON_MODEL_WEIGHTS_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_registry.h"

namespace convoy {

// Serialises flat weights (layout order) as a {name: tensor} dict.
std::string EncodeWeights(const float* flat, const std::vector<ParameterSlot>& layout);

// Parses EncodeWeights' bytes back into flat weights of `layout`. Errors: DATA_LOSS naming `what` when the
// bytes are not such a dict, or a parameter is missing or has another shape.
absl::StatusOr<std::vector<float>> DecodeWeights(const std::string& bytes,
                                                 const std::vector<ParameterSlot>& layout,
                                                 const std::string& what);

// Reads a weights file, or a checkpoint directory's weights.pt. Errors as DecodeWeights; NOT_FOUND when
// the file cannot be read.
absl::StatusOr<std::vector<float>> ReadWeightsFile(const std::string& path,
                                                   const std::vector<ParameterSlot>& layout);

// Writes atomically and durably (common/support/files.h WriteFileAtomically: temporary file, fsync, rename,
// directory fsync).
absl::Status WriteWeightsFile(const std::string& path, const float* flat,
                              const std::vector<ParameterSlot>& layout);

}  // namespace convoy

#endif  // CONVOY_COMMON_MODEL_WEIGHTS_FILE_H_
