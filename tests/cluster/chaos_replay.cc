// convoy_chaos_replay: the weights side of the chaos test (chaos_test.sh).
//
//   convoy_chaos_replay --model=M --seed=S --lineage=FILE --final=DIR --learning_rate=LR
// starts from the weights convoy_ps --model=M --seed=S starts from, replays the lineage
// (chaos_check.py's: one line per version, in version order, each "session sequence minibatches"
// for every push of that version's step in the order the step summed them) with plain SGD,
// w -= LR * g, each push's gradient recomputed by ReplayableGradient and a step's combined by the
// server's own CombineGradients (their minibatch-weighted mean), and compares the result with the
// final checkpoint's weights bit for bit. Exact, not approximate: LR is a power of two, so LR * g
// is exact and each step is one rounding of w - LR * g, as the server's SGD does it, in the same
// order. Exit 0: equal; 1: not, with how many values differ and by how much; 2: bad arguments or
// files.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "agent/client/synthetic_gradient.h"
#include "common/model/model_registry.h"
#include "common/model/weights_file.h"
#include "common/settings/process_settings.h"
#include "common/support/settings_table.h"
#include "param_server/core/optimizer.h"

// convoy_chaos_replay's flags, a row each (common/support/settings_table.h); the settings other
// binaries take too are written through common/settings/process_settings.h.
#define CONVOY_CHAOS_REPLAY_SETTINGS(X)                                                       \
  CONVOY_PROCESS_SETTING(X, model, "tiny", "The run's model.")                                \
  CONVOY_PROCESS_SETTING(X, seed, 1, "The run's convoy_ps --seed (its initial weights).")     \
  X(std::string, lineage, "",                                                                 \
    "The lineage, one line per version: 'session sequence minibatches' for each push of its " \
    "step.")                                                                                  \
  X(std::string, final, "", "The final weights (a checkpoint directory or its weights.pt).")  \
  X(double, learning_rate, 0.0625, "The server's SGD learning rate.")
CONVOY_CHAOS_REPLAY_SETTINGS(CONVOY_SETTING_FLAG)

namespace convoy {
namespace {

int Check(const ModelInfo& model) {
  absl::StatusOr<std::vector<float>> weights =
      InitialFlatWeights(absl::GetFlag(FLAGS_model), kDefaultNumActions, absl::GetFlag(FLAGS_seed));
  absl::StatusOr<std::vector<float>> final_weights =
      ReadWeightsFile(absl::GetFlag(FLAGS_final), model.layout);
  if (!weights.ok() || !final_weights.ok()) {
    std::fprintf(stderr, "convoy_chaos_replay: %s\n",
                 (!weights.ok() ? weights : final_weights).status().ToString().c_str());
    return 2;
  }
  std::ifstream lineage(absl::GetFlag(FLAGS_lineage));
  if (!lineage) {
    std::fprintf(stderr, "convoy_chaos_replay: cannot read %s\n",
                 absl::GetFlag(FLAGS_lineage).c_str());
    return 2;
  }
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  std::vector<std::vector<float>> gradients;
  uint64_t versions = 0, pushes = 0;
  std::string line;
  while (std::getline(lineage, line)) {
    std::istringstream step(line);
    std::vector<ps::StepInput> inputs;
    uint64_t session = 0, sequence = 0;
    uint32_t minibatches = 0;
    while (step >> session >> sequence >> minibatches) {
      if (gradients.size() <= inputs.size()) gradients.emplace_back(weights->size());
      std::vector<float>& gradient = gradients[inputs.size()];
      agent::ReplayableGradient(session, sequence, gradient.size(), gradient.data());
      inputs.push_back(ps::StepInput{gradient.data(), minibatches, 1.0});
    }
    if (inputs.empty()) {
      std::fprintf(stderr, "convoy_chaos_replay: version %llu of the lineage has no push\n",
                   static_cast<unsigned long long>(versions + 1));
      return 2;
    }
    CombineGradients(inputs, weights->size());  // As the server's step does; into inputs[0].
    const float* gradient = inputs.front().values;
    for (size_t i = 0; i < weights->size(); ++i) (*weights)[i] -= lr * gradient[i];
    ++versions;
    pushes += inputs.size();
  }
  size_t differ = 0;
  double largest = 0;
  for (size_t i = 0; i < weights->size(); ++i) {
    if ((*weights)[i] != (*final_weights)[i]) {
      ++differ;
      largest = std::max(largest, std::fabs(double{(*weights)[i]} - (*final_weights)[i]));
    }
  }
  if (differ > 0) {
    std::printf(
        "convoy_chaos_replay: FAIL: the replay of %llu versions differs from the final weights in "
        "%zu of %zu values (largest difference %g; one push is %g per value)\n",
        static_cast<unsigned long long>(versions), differ, weights->size(), largest,
        lr * agent::kReplayableGradientStep);
    return 1;
  }
  std::printf(
      "convoy_chaos_replay: the replay of the lineage's %llu pushes in %llu steps, in version "
      "order, "
      "equals the final weights, all %zu values bit for bit\n",
      static_cast<unsigned long long>(pushes), static_cast<unsigned long long>(versions),
      weights->size());
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<convoy::ModelInfo> model = convoy::DescribeModel(absl::GetFlag(FLAGS_model));
  if (!model.ok()) {
    std::fprintf(stderr, "convoy_chaos_replay: %s\n", model.status().ToString().c_str());
    return 2;
  }
  return convoy::Check(*model);
}
