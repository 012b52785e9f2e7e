#include "common/model/model_registry.h"

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/model/q_network.h"
#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("Registry pins every model's parameter count", "[models]") {
  // cookbook: conv 3->16, 16->32, 32->32 (3x3), dense 6944->128, dense 128->5.
  const size_t cookbook = (3 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 32 * 9 + 32) +
                          (32 * 7 * 31 * 128 + 128) + (128 * 5 + 5);
  REQUIRE(cookbook == 903941);
  struct Case {
    const char* name;
    size_t count;
  };
  const Case cases[] = {
      {"cookbook", 903941},
      // Dueling: the 128->5 head becomes value 128->1 and advantage 128->5.
      {"cookbook_dueling", 903941 + (128 + 1)},
      // Nature DQN: conv 4->32 8x8, 32->64 4x4, 64->64 3x3, dense 3136->512, 512->5.
      {"nature", (4 * 32 * 64 + 32) + (32 * 64 * 16 + 64) + (64 * 64 * 9 + 64) +
                     (3136 * 512 + 512) + (512 * 5 + 5)},
      {"nature_dueling", 1686693 + (512 + 1)},
      {"tiny", (3 * 8 * 9 + 8) + (8 * 8 * 8 * 32 + 32) + (32 * 5 + 5)},
      // compact: conv 3->16, 16->32 (3x3) on 3x14x63, dense 32*3*15 -> 128, 128 -> 5.
      {"compact",
       (3 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 3 * 15 * 128 + 128) + (128 * 5 + 5)},
      // compact_tall: the same layers on 3x29x63, dense 32*7*15 -> 128.
      {"compact_tall",
       (3 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 7 * 15 * 128 + 128) + (128 * 5 + 5)},
      // strided_tall: stride-2 convolutions, 29x63 -> 15x32 -> 8x16, dense 32*8*16 -> 128.
      {"strided_tall",
       (3 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 8 * 16 * 128 + 128) + (128 * 5 + 5)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelInfo> info = DescribeModel(c.name);
    REQUIRE(info.ok());
    INFO(c.name);
    CHECK(info->parameter_count == c.count);
  }
  CHECK(DescribeModel("nature")->parameter_count == 1686693);
}

TEST_CASE("The wide test model has 100M parameters", "[models]") {
  absl::StatusOr<ModelInfo> info = DescribeModel("wide");
  REQUIRE(info.ok());
  CHECK(info->parameter_count == (10000ull * 10000 + 10000) + (10000 * 5 + 5));
}

TEST_CASE("Unknown model names are refused with the known ones listed", "[models]") {
  absl::StatusOr<ModelInfo> info = DescribeModel("resnet");
  REQUIRE(info.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(info.status().message()),
             Catch::Matchers::ContainsSubstring("resnet") &&
                 Catch::Matchers::ContainsSubstring("cookbook") &&
                 Catch::Matchers::ContainsSubstring("nature_dueling"));
  CHECK(ResolveModel("tiny", 0).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("A _stackK model takes K frames of its architecture's input", "[models]") {
  const absl::StatusOr<ModelSpec> one = ResolveModel("compact");
  const absl::StatusOr<ModelSpec> two = ResolveModel("compact_stack2");
  const absl::StatusOr<ModelSpec> dueling = ResolveModel("tiny_stack4_dueling");
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  REQUIRE(dueling.ok());
  CHECK(two->name == "compact_stack2");
  CHECK(two->architecture == Architecture::kCompact);
  CHECK(two->channels == 2 * one->channels);
  CHECK(two->height == one->height);
  CHECK(two->width == one->width);
  CHECK(dueling->channels == 4 * ResolveModel("tiny")->channels);
  CHECK(dueling->dueling);
  // Only the first convolution grows: 3 more input channels of 3x3 for each of its 16 filters.
  CHECK(DescribeModel("compact_stack2")->parameter_count ==
        DescribeModel("compact")->parameter_count + 16 * 3 * 3 * 3);
  CHECK(DescribeModel("compact_stack2")->fingerprint != DescribeModel("compact")->fingerprint);
  QNetwork net = *BuildQNetwork(*two, 1);
  net->eval();
  const torch::Tensor q = net->forward(torch::rand({2, two->channels, two->height, two->width}));
  const std::vector<int64_t> expected = {2, kDefaultNumActions};
  CHECK(q.sizes().vec() == expected);
  for (const char* bad : {"compact_stack1", "compact_stack9", "compact_stack", "compact_stackx",
                          "compact_stack02", "compact_stack+2", "resnet_stack2"}) {
    INFO(bad);
    const absl::StatusOr<ModelSpec> refused = ResolveModel(bad);
    REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(refused.status().message()), Catch::Matchers::ContainsSubstring(bad));
  }
  CHECK_THAT(std::string(ResolveModel("compact_stack9").status().message()),
             Catch::Matchers::ContainsSubstring("2 to 8 frames"));
}

TEST_CASE("Fingerprints identify architecture, head and action count", "[models]") {
  const std::string cookbook = DescribeModel("cookbook")->fingerprint;
  CHECK(cookbook == DescribeModel("cookbook")->fingerprint);
  CHECK(cookbook.rfind("cookbook-", 0) == 0);
  CHECK(cookbook != DescribeModel("cookbook_dueling")->fingerprint);
  CHECK(cookbook != DescribeModel("cookbook", 3)->fingerprint);
  CHECK(cookbook != DescribeModel("nature")->fingerprint);
}

TEST_CASE("The flat layout follows named_parameters order without gaps", "[models]") {
  absl::StatusOr<ModelInfo> info = DescribeModel("cookbook");
  REQUIRE(info.ok());
  size_t offset = 0;
  for (const ParameterSlot& slot : info->layout) {
    CHECK(slot.offset == offset);
    size_t numel = 1;
    for (int64_t d : slot.shape) numel *= static_cast<size_t>(d);
    CHECK(slot.numel == numel);
    offset += slot.numel;
  }
  CHECK(offset == info->parameter_count);
  CHECK(info->layout.front().name == "features.0.weight");
  CHECK(info->layout.back().name == "head.bias");
}

TEST_CASE("Flattening and loading flat weights round-trips exactly", "[models]") {
  absl::StatusOr<ModelSpec> spec = ResolveModel("tiny");
  REQUIRE(spec.ok());
  QNetwork a = *BuildQNetwork(*spec, 1);
  QNetwork b = *BuildQNetwork(*spec, 2);
  std::vector<float> flat_a, flat_b;
  FlattenParameters(*a, &flat_a);
  FlattenParameters(*b, &flat_b);
  REQUIRE(flat_a != flat_b);  // Different seeds, different weights.
  REQUIRE(LoadFlatParameters(flat_a.data(), flat_a.size(), *b).ok());
  FlattenParameters(*b, &flat_b);
  CHECK(flat_a == flat_b);
  CHECK(LoadFlatParameters(flat_a.data(), flat_a.size() - 1, *b).code() ==
        absl::StatusCode::kInvalidArgument);
  // Same seed, same weights: initial weights are reproducible.
  CHECK(*InitialFlatWeights("tiny", kDefaultNumActions, 1) == flat_a);
}

TEST_CASE("Q-networks map a batch of observations to one Q-value per action", "[models]") {
  for (const char* name :
       {"cookbook", "compact", "compact_tall", "strided_tall_dueling", "nature_dueling", "tiny"}) {
    absl::StatusOr<ModelSpec> spec = ResolveModel(name);
    REQUIRE(spec.ok());
    QNetwork net = *BuildQNetwork(*spec, 3);
    net->eval();
    torch::Tensor q = net->forward(torch::rand({2, spec->channels, spec->height, spec->width}));
    INFO(name);
    const std::vector<int64_t> expected = {2, kDefaultNumActions};
    CHECK(q.sizes().vec() == expected);
  }
}

TEST_CASE("A _qr model's heads give quantiles whose mean is its Q-value", "[models]") {
  for (const char* name : {"tiny_qr", "compact_stack2_dueling_qr"}) {
    INFO(name);
    const absl::StatusOr<ModelSpec> spec = ResolveModel(name);
    REQUIRE(spec.ok());
    CHECK(spec->quantiles == kQuantiles);
    CHECK(spec->dueling == absl::StrContains(name, "_dueling"));
    CHECK(ResolveModel(absl::StrReplaceAll(name, {{"_qr", ""}}))->quantiles == 0);
    QNetwork net = *BuildQNetwork(*spec, 3);
    net->eval();
    const torch::Tensor x = torch::rand({2, spec->channels, spec->height, spec->width});
    const torch::Tensor z = net->quantiles(x);
    const std::vector<int64_t> expected = {2, kDefaultNumActions, kQuantiles};
    CHECK(z.sizes().vec() == expected);
    CHECK(torch::allclose(net->forward(x), z.mean(2)));
  }
  // Every head grows by its quantiles: the plain head to actions x quantiles outputs.
  const size_t plain = DescribeModel("tiny")->parameter_count;
  CHECK(DescribeModel("tiny_qr")->parameter_count ==
        plain + (32 + 1) * kDefaultNumActions * (kQuantiles - 1));
  CHECK(DescribeModel("tiny_qr")->fingerprint != DescribeModel("tiny")->fingerprint);
  // The suffix comes last.
  const absl::StatusOr<ModelSpec> misplaced = ResolveModel("tiny_qr_dueling");
  REQUIRE_FALSE(misplaced.ok());
  CHECK_THAT(std::string(misplaced.status().message()), Catch::Matchers::ContainsSubstring("_qr"));
}

TEST_CASE("A built network describes itself as the registry describes its model", "[models]") {
  for (const char* name : {"tiny", "tiny_dueling", "compact"}) {
    const absl::StatusOr<ModelSpec> spec = ResolveModel(name);
    REQUIRE(spec.ok());
    absl::StatusOr<QNetwork> net = BuildQNetwork(*spec, 7);
    REQUIRE(net.ok());
    const ModelInfo built = ModelInfoOf(*spec, **net);
    const absl::StatusOr<ModelInfo> described = DescribeModel(name);
    REQUIRE(described.ok());
    CHECK(built.spec.name == name);
    CHECK(built.fingerprint == described->fingerprint);
    CHECK(built.parameter_count == described->parameter_count);
    REQUIRE(built.layout.size() == described->layout.size());
    for (size_t i = 0; i < built.layout.size(); ++i) {
      CHECK(built.layout[i].name == described->layout[i].name);
      CHECK(built.layout[i].offset == described->layout[i].offset);
    }
  }
}

}  // namespace
}  // namespace convoy
