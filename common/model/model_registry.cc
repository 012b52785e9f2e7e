#include "common/model/model_registry.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/model/q_network.h"
#include "common/support/sha256.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace {

constexpr char kDuelingSuffix[] = "_dueling";
constexpr char kQuantileSuffix[] = "_qr";
constexpr absl::string_view kStackInfix = "_stack";
constexpr int kMaxStackedFrames = 8;  // K is one digit, 2 to 8.

struct ArchitectureEntry {
  const char* name;
  Architecture architecture;
  int channels, height, width;
};

// Observation shapes: the cookbook's crop of AirSim's 256x144 scene (rows 76..134, columns 0..254),
// that crop 4x4 and 2x4 average-pooled, the Nature DQN's 4 stacked 84x84 grayscale frames, a small
// image for fast tests, and a 100x100 input to a 100M-parameter MLP for scale tests.
constexpr ArchitectureEntry kArchitectures[] = {
    {"cookbook", Architecture::kCookbook, 3, 59, 255},
    {"compact", Architecture::kCompact, 3, 14, 63},
    {"compact_tall", Architecture::kCompactTall, 3, 29, 63},
    {"strided_tall", Architecture::kStridedTall, 3, 29, 63},
    {"nature", Architecture::kNature, 4, 84, 84},
    {"tiny", Architecture::kTiny, 3, 16, 16},
    {"wide", Architecture::kWide, 1, 100, 100},
};

torch::nn::Conv2dOptions Conv(int in, int out, int kernel, int stride, int padding) {
  return torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding);
}

// What every head reads: the features (convolutional, or the input flattened) and the hidden
// layer after them, `width` wide. Each builder makes the features first, then the hidden layer:
// the initial weights are drawn in that order.
struct Trunk {
  torch::nn::Sequential features{nullptr};
  torch::nn::Sequential hidden{nullptr};
  int width = 0;
};

Trunk CookbookTrunk(const ModelSpec& spec) {
  Trunk trunk;
  // conv 16/32/32, 3x3 padding 1, each followed by ReLU and 2x2 max-pool; 59x255 -> 7x31.
  trunk.features = torch::nn::Sequential(
      torch::nn::Conv2d(Conv(spec.channels, 16, 3, 1, 1)), torch::nn::ReLU(),
      torch::nn::MaxPool2d(2), torch::nn::Conv2d(Conv(16, 32, 3, 1, 1)), torch::nn::ReLU(),
      torch::nn::MaxPool2d(2), torch::nn::Conv2d(Conv(32, 32, 3, 1, 1)), torch::nn::ReLU(),
      torch::nn::MaxPool2d(2), torch::nn::Flatten());
  // The tutorial's dense 128 has no activation; kept as it was.
  trunk.hidden = torch::nn::Sequential(torch::nn::Dropout(0.2), torch::nn::Linear(32 * 7 * 31, 128),
                                       torch::nn::Dropout(0.2));
  trunk.width = 128;
  return trunk;
}

// The cookbook's crop, average-pooled (agent/environment/preprocess.h): 4x4 for compact, the same
// view of the road at 1/16 of the pixels, so a CPU trains it in minutes; 2x4 for compact_tall,
// which keeps twice the rows, those where a car far ahead first shows. conv 16/32 3x3 padding 1,
// ReLU, max-pool 2: 14x63 -> 3x15, 29x63 -> 7x15.
Trunk CompactTrunk(const ModelSpec& spec) {
  Trunk trunk;
  trunk.features =
      torch::nn::Sequential(torch::nn::Conv2d(Conv(spec.channels, 16, 3, 1, 1)), torch::nn::ReLU(),
                            torch::nn::MaxPool2d(2), torch::nn::Conv2d(Conv(16, 32, 3, 1, 1)),
                            torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten());
  const int64_t pooled = static_cast<int64_t>(spec.height / 4) * (spec.width / 4);
  trunk.hidden = torch::nn::Sequential(torch::nn::Linear(32 * pooled, 128), torch::nn::ReLU());
  trunk.width = 128;
  return trunk;
}

// compact_tall's input at fewer multiply-adds than compact's (1.3 million a sample against 1.6;
// its train step still took twice compact's time on Debian 12's LibTorch, per
// docs/benchmarks.md): conv 16/32 3x3, stride 2, padding 1, each followed by ReLU (no pooling):
// 29x63 -> 15x32 -> 8x16.
Trunk StridedTallTrunk(const ModelSpec& spec) {
  Trunk trunk;
  trunk.features = torch::nn::Sequential(
      torch::nn::Conv2d(Conv(spec.channels, 16, 3, 2, 1)), torch::nn::ReLU(),
      torch::nn::Conv2d(Conv(16, 32, 3, 2, 1)), torch::nn::ReLU(), torch::nn::Flatten());
  const int64_t rows = ((spec.height + 1) / 2 + 1) / 2, columns = ((spec.width + 1) / 2 + 1) / 2;
  trunk.hidden =
      torch::nn::Sequential(torch::nn::Linear(32 * rows * columns, 128), torch::nn::ReLU());
  trunk.width = 128;
  return trunk;
}

Trunk NatureTrunk(const ModelSpec& spec) {
  Trunk trunk;
  trunk.features = torch::nn::Sequential(
      torch::nn::Conv2d(Conv(spec.channels, 32, 8, 4, 0)), torch::nn::ReLU(),
      torch::nn::Conv2d(Conv(32, 64, 4, 2, 0)), torch::nn::ReLU(),
      torch::nn::Conv2d(Conv(64, 64, 3, 1, 0)), torch::nn::ReLU(), torch::nn::Flatten());
  trunk.hidden = torch::nn::Sequential(torch::nn::Linear(64 * 7 * 7, 512), torch::nn::ReLU());
  trunk.width = 512;
  return trunk;
}

// A 100M-parameter MLP: no use for driving, it proves that transport and storage scale.
Trunk WideTrunk(const ModelSpec& spec) {
  Trunk trunk;
  trunk.features = torch::nn::Sequential(torch::nn::Flatten());
  trunk.hidden = torch::nn::Sequential(
      torch::nn::Linear(spec.channels * spec.height * spec.width, 10000), torch::nn::ReLU());
  trunk.width = 10000;
  return trunk;
}

Trunk TinyTrunk(const ModelSpec& spec) {
  Trunk trunk;
  trunk.features =
      torch::nn::Sequential(torch::nn::Conv2d(Conv(spec.channels, 8, 3, 1, 1)), torch::nn::ReLU(),
                            torch::nn::MaxPool2d(2), torch::nn::Flatten());
  trunk.hidden = torch::nn::Sequential(
      torch::nn::Linear(8 * (spec.height / 2) * (spec.width / 2), 32), torch::nn::ReLU());
  trunk.width = 32;
  return trunk;
}

Trunk TrunkFor(const ModelSpec& spec) {
  switch (spec.architecture) {
    case Architecture::kCookbook:
      return CookbookTrunk(spec);
    case Architecture::kCompact:
    case Architecture::kCompactTall:
      return CompactTrunk(spec);
    case Architecture::kStridedTall:
      return StridedTallTrunk(spec);
    case Architecture::kNature:
      return NatureTrunk(spec);
    case Architecture::kWide:
      return WideTrunk(spec);
    case Architecture::kTiny:
      return TinyTrunk(spec);
  }
  return Trunk();
}

}  // namespace

QNetworkImpl::QNetworkImpl(const ModelSpec& spec) : spec_(spec) {
  Trunk trunk = TrunkFor(spec);
  features_ = std::move(trunk.features);
  hidden_ = std::move(trunk.hidden);
  const int hidden_width = trunk.width;
  register_module("features", features_);
  register_module("hidden", hidden_);
  const int64_t per_action = std::max(1, spec.quantiles);
  if (spec.dueling) {
    value_ = register_module("value", torch::nn::Linear(hidden_width, per_action));
    advantage_ = register_module("advantage",
                                 torch::nn::Linear(hidden_width, spec.num_actions * per_action));
  } else {
    head_ = register_module("head", torch::nn::Linear(hidden_width, spec.num_actions * per_action));
  }
}

torch::Tensor QNetworkImpl::quantiles(torch::Tensor x) {
  const torch::Tensor h = hidden_->forward(features_->forward(x));
  const int64_t n = h.size(0), per_action = std::max(1, spec_.quantiles);
  if (!spec_.dueling) return head_->forward(h).view({n, spec_.num_actions, per_action});
  // The dueling split per quantile: Z_i(a) = V_i + A_i(a) - mean over a of A_i.
  const torch::Tensor advantage = advantage_->forward(h).view({n, spec_.num_actions, per_action});
  return value_->forward(h).view({n, 1, per_action}) + advantage -
         advantage.mean(/*dim=*/1, /*keepdim=*/true);
}

torch::Tensor QNetworkImpl::forward(torch::Tensor x) {
  // One set of heads: without quantiles each action's one "quantile" is its Q-value.
  const torch::Tensor z = quantiles(x);
  return spec_.quantiles > 0 ? z.mean(/*dim=*/2) : z.squeeze(2);
}

std::vector<std::string> RegisteredModelNames() {
  std::vector<std::string> names;
  for (const ArchitectureEntry& a : kArchitectures) {
    names.push_back(a.name);
    names.push_back(absl::StrCat(a.name, kDuelingSuffix));
  }
  return names;
}

absl::StatusOr<ModelSpec> ResolveModel(const std::string& name, int num_actions) {
  if (num_actions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_actions must be >= 1, got ", num_actions));
  }
  absl::string_view base = name;
  const bool quantile = absl::ConsumeSuffix(&base, kQuantileSuffix);
  const bool dueling = absl::ConsumeSuffix(&base, kDuelingSuffix);
  // "<architecture>_stack<K>": the architecture's input, K frames of it stacked along C.
  int frames = 1;
  if (const size_t at = base.rfind(kStackInfix); at != absl::string_view::npos) {
    const absl::string_view count = base.substr(at + kStackInfix.size());
    if (count.size() != 1 || count[0] < '2' || count[0] > '0' + kMaxStackedFrames) {
      return absl::InvalidArgumentError(absl::StrCat("model '", name, "': '", kStackInfix, count,
                                                     "' must stack 2 to ", kMaxStackedFrames,
                                                     " frames, e.g. compact", kStackInfix, "2"));
    }
    frames = count[0] - '0';
    base = base.substr(0, at);
  }
  for (const ArchitectureEntry& a : kArchitectures) {
    if (base == a.name) {
      ModelSpec spec;
      spec.name = name;
      spec.architecture = a.architecture;
      spec.dueling = dueling;
      spec.quantiles = quantile ? kQuantiles : 0;
      spec.num_actions = num_actions;
      spec.channels = a.channels * frames;
      spec.height = a.height;
      spec.width = a.width;
      return spec;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name, "'; known models: ", absl::StrJoin(RegisteredModelNames(), ", "),
      ", each also as <name>", kStackInfix, "<K> (K frames stacked, before any ", kDuelingSuffix,
      ") and with a last ", kQuantileSuffix, " (quantile heads)"));
}

absl::StatusOr<QNetwork> BuildQNetwork(const ModelSpec& spec, uint64_t seed) {
  CONVOY_ASSIGN_OR_RETURN(ModelSpec resolved, ResolveModel(spec.name, spec.num_actions));
  torch::manual_seed(seed);
  QNetwork net(resolved);
  return net;
}

std::vector<ParameterSlot> ParameterLayoutOf(torch::nn::Module& module) {
  std::vector<ParameterSlot> layout;
  size_t offset = 0;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    ParameterSlot slot;
    slot.name = item.key();
    slot.shape = item.value().sizes().vec();
    slot.offset = offset;
    slot.numel = static_cast<size_t>(item.value().numel());
    offset += slot.numel;
    layout.push_back(std::move(slot));
  }
  return layout;
}

std::string FingerprintOf(const std::string& model_name, torch::nn::Module& module) {
  std::string canonical = absl::StrCat("convoy-model-v1|", model_name);
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    absl::StrAppend(&canonical, "|", item.key(), ":", absl::StrJoin(item.value().sizes(), "x"), ":",
                    c10::toString(item.value().scalar_type()));
  }
  return absl::StrCat(model_name, "-", Sha256Hex(canonical).substr(0, 16));
}

void FlattenParameters(torch::nn::Module& module, std::vector<float>* out) {
  torch::NoGradGuard no_grad;
  size_t total = 0;
  for (const torch::Tensor& p : module.parameters()) total += static_cast<size_t>(p.numel());
  out->resize(total);
  size_t offset = 0;
  for (const torch::Tensor& p : module.parameters()) {
    torch::Tensor cpu = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(out->data() + offset, cpu.data_ptr<float>(), cpu.numel() * sizeof(float));
    offset += static_cast<size_t>(cpu.numel());
  }
}

absl::Status LoadFlatParameters(const float* flat, size_t count, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  size_t total = 0;
  for (const torch::Tensor& p : module.parameters()) total += static_cast<size_t>(p.numel());
  if (total != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("flat weights have ", count, " elements, the model has ", total));
  }
  size_t offset = 0;
  for (torch::Tensor& p : module.parameters()) {
    torch::Tensor src =
        torch::from_blob(const_cast<float*>(flat) + offset, p.sizes(), torch::kFloat32);
    p.copy_(src);  // Copies across devices when the module lives on a GPU.
    offset += static_cast<size_t>(p.numel());
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelInfo> DescribeModel(const std::string& name, int num_actions) {
  CONVOY_ASSIGN_OR_RETURN(ModelSpec spec, ResolveModel(name, num_actions));
  QNetwork net(spec);
  return ModelInfoOf(spec, *net);
}

ModelInfo ModelInfoOf(const ModelSpec& spec, torch::nn::Module& module) {
  ModelInfo info;
  info.spec = spec;
  info.layout = ParameterLayoutOf(module);
  info.fingerprint = FingerprintOf(spec.name, module);
  for (const ParameterSlot& slot : info.layout) info.parameter_count += slot.numel;
  return info;
}

absl::StatusOr<std::vector<float>> InitialFlatWeights(const std::string& name, int num_actions,
                                                      uint64_t seed) {
  CONVOY_ASSIGN_OR_RETURN(ModelSpec spec, ResolveModel(name, num_actions));
  CONVOY_ASSIGN_OR_RETURN(QNetwork net, BuildQNetwork(spec, seed));
  std::vector<float> flat;
  FlattenParameters(*net, &flat);
  return flat;
}

}  // namespace convoy
