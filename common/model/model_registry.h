// The model registry: every architecture convoy knows, by name, without exposing LibTorch.
//
// Names: "cookbook" (the AutonomousDrivingCookbook tutorial's Q-network on a 3x59x255 crop),
// "compact" (a smaller network on the cookbook crop pooled 4x4 to 3x14x63, the default for training
// on a CPU), "compact_tall" (the same network on the crop pooled 2x4 to 3x29x63: twice the rows,
// where a car far ahead first appears), "strided_tall" (that input through stride-2 convolutions
// instead of max-pooling: fewer multiply-adds than "compact", though not less time on every CPU),
// "nature" (the DQN Nature network on 4x84x84 grayscale frames), "tiny" (a small network on 3x16x16
// for tests), "wide" (a 100M-parameter MLP for scale tests), each optionally with a dueling head:
// "cookbook_dueling", "nature_dueling", "tiny_dueling", "wide_dueling". Any of them takes K stacked
// frames of its input as
// "<name>_stack<K>[_dueling]" (K in 2..8): "compact_stack2" is the compact network on the last two
// pooled crops, 6 channels, oldest first. A "_qr" suffix, last, makes any of them a quantile
// network (QR-DQN, Dabney et al. 2018): each action's head gives kQuantiles quantiles of its return
// instead of its mean, "compact_stack2_dueling_qr".
#ifndef CONVOY_COMMON_MODEL_MODEL_REGISTRY_H_
#define CONVOY_COMMON_MODEL_MODEL_REGISTRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy {

inline constexpr int kDefaultNumActions = 5;
// A quantile network's quantiles per action, at the midpoints (2i + 1) / 2N of N equal bins.
inline constexpr int kQuantiles = 32;

// The network families the registry builds. A model name is parsed into one once, by ResolveModel;
// code that builds a network switches over every value, so a new family cannot fall into another's
// branch.
enum class Architecture { kCookbook, kCompact, kCompactTall, kStridedTall, kNature, kTiny, kWide };

// What a model is: architecture, head, action count and observation shape.
struct ModelSpec {
  std::string name;  // Full registry name, e.g. "cookbook" or "nature_dueling".
  Architecture architecture = Architecture::kCompact;
  bool dueling = false;
  // 0: the network's heads give each action's Q-value; else each action's return distribution as
  // this many quantiles (forward() still gives their mean, the Q-value).
  int quantiles = 0;
  int num_actions = kDefaultNumActions;
  int channels = 0;  // Observation shape [channels, height, width].
  int height = 0;
  int width = 0;
};

// One parameter in the flat layout.
struct ParameterSlot {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // In elements.
  size_t numel = 0;
};

// A model's identity and flat size, enough for the parameter server's wire checks.
struct ModelInfo {
  ModelSpec spec;
  std::string fingerprint;
  size_t parameter_count = 0;
  std::vector<ParameterSlot> layout;
};

// All registry names, for --help texts and error messages.
std::vector<std::string> RegisteredModelNames();

// Resolves a registry name. Errors: INVALID_ARGUMENT naming the unknown model and the known ones.
absl::StatusOr<ModelSpec> ResolveModel(const std::string& name,
                                       int num_actions = kDefaultNumActions);

// Builds the model once to read its layout and fingerprint.
absl::StatusOr<ModelInfo> DescribeModel(const std::string& name,
                                        int num_actions = kDefaultNumActions);

// Freshly initialised weights for `seed`, flattened in layout order.
absl::StatusOr<std::vector<float>> InitialFlatWeights(const std::string& name, int num_actions,
                                                      uint64_t seed);

}  // namespace convoy

#endif  // CONVOY_COMMON_MODEL_MODEL_REGISTRY_H_
