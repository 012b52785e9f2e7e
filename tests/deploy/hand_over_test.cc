// The hand-over's choice and its evaluations, without training: the validations' outcome is given
// (or, for the candidates, driven by a BestPolicy on short episodes of untrained networks), and the
// evaluation is a fake that records what it was asked to drive.
#include "deploy/local/hand_over.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "agent/evaluation/evaluation.h"
#include "common/model/model_registry.h"
#include "tests/catch.h"

namespace convoy::deploy {
namespace {

TEST_CASE("Without validation the run hands over its last weights", "[hand_over]") {
  const HandOverChoice choice = ChooseHandOver(std::nullopt, 40);
  CHECK(choice.candidate == HandOverCandidate::kLast);
  CHECK(choice.version == 40);
  CHECK_FALSE(choice.chose_earlier());
  CHECK_FALSE(choice.averaged());
}

TEST_CASE("When the last weights validate best they are handed over", "[hand_over]") {
  const HandOverChoice choice = ChooseHandOver(ValidatedBest{40, false}, 40);
  CHECK(choice.candidate == HandOverCandidate::kLast);
  CHECK(choice.version == 40);
}

TEST_CASE("An earlier version that validated better than the last is handed over", "[hand_over]") {
  const HandOverChoice choice = ChooseHandOver(ValidatedBest{12, false}, 40);
  CHECK(choice.candidate == HandOverCandidate::kValidated);
  CHECK(choice.version == 12);
  CHECK(choice.chose_earlier());
  CHECK_FALSE(choice.averaged());
}

TEST_CASE("The averaged network is handed over when it validated best, even as of the last version",
          "[hand_over]") {
  const HandOverChoice choice = ChooseHandOver(ValidatedBest{40, true}, 40);
  CHECK(choice.candidate == HandOverCandidate::kAverage);
  CHECK(choice.version == 40);
  CHECK(choice.chose_earlier());
  CHECK(choice.averaged());
}

// Summaries told apart by their mean return: the weights' first value.
EvaluatePolicy Recording(std::vector<HandOverCandidate>* asked) {
  return [asked](HandOverCandidate which,
                 const std::vector<float>& weights) -> absl::StatusOr<agent::EvalSummary> {
    asked->push_back(which);
    agent::EvalSummary summary;
    summary.mean_return = weights.at(0);
    return summary;
  };
}

RunEnd EndWithAverage() {
  RunEnd end;
  end.last_version = 40;
  end.last_weights = {1};
  end.average_version = 40;
  end.averaged = {2};
  return end;
}

TEST_CASE("Without validation the last weights are evaluated once, the average beside them",
          "[hand_over]") {
  std::vector<HandOverCandidate> asked;
  absl::StatusOr<HandOverResult> handed =
      HandOver(nullptr, EndWithAverage(), HandOverOptions{}, Recording(&asked));
  REQUIRE(handed.ok());
  CHECK(asked ==
        std::vector<HandOverCandidate>{HandOverCandidate::kAverage, HandOverCandidate::kLast});
  CHECK(handed->choice.candidate == HandOverCandidate::kLast);
  CHECK(handed->weights == std::vector<float>{1});
  CHECK(handed->handed_over.mean_return == 1);
  CHECK(handed->last.mean_return == 1);
  REQUIRE(handed->average.has_value());
  CHECK(handed->average->mean_return == 2);
}

TEST_CASE("A run without an averaged network evaluates only what it hands over", "[hand_over]") {
  RunEnd end;
  end.last_version = 7;
  end.last_weights = {3};
  std::vector<HandOverCandidate> asked;
  absl::StatusOr<HandOverResult> handed =
      HandOver(nullptr, end, HandOverOptions{}, Recording(&asked));
  REQUIRE(handed.ok());
  CHECK(asked == std::vector<HandOverCandidate>{HandOverCandidate::kLast});
  CHECK_FALSE(handed->average.has_value());
  CHECK(handed->choice.version == 7);
}

TEST_CASE(
    "Every candidate is evaluated once: the best validated too, unless it is the choice or "
    "the last weights",
    "[hand_over]") {
  agent::EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 5;  // Short validations of freshly drawn networks.
  for (uint64_t last : {2, 3}) {
    absl::StatusOr<std::unique_ptr<agent::BestPolicy>> best =
        agent::BestPolicy::Create("compact", spec, 2, "");
    REQUIRE(best.ok());
    std::vector<float> last_weights;
    for (uint64_t version = 1; version <= last; ++version) {
      last_weights = *InitialFlatWeights("compact", kDefaultNumActions, version);
      REQUIRE((*best)->Consider(version, last_weights).ok());
    }
    const std::optional<agent::BestPolicy::Validated> top = (*best)->best_validated();
    REQUIRE(top.has_value());
    RunEnd end;
    end.last_version = last;
    end.last_weights = last_weights;
    end.average_version = last;
    end.averaged = *InitialFlatWeights("compact", kDefaultNumActions, 9);
    std::vector<HandOverCandidate> asked;
    absl::StatusOr<HandOverResult> handed =
        HandOver(best->get(), end, HandOverOptions{}, Recording(&asked));
    REQUIRE(handed.ok());
    INFO("last v" << last << ", best validated v" << top->version << ", chosen "
                  << static_cast<int>(handed->choice.candidate));
    // Each of the three candidates is there, and none was driven twice.
    REQUIRE(handed->validated.has_value());
    REQUIRE(handed->average.has_value());
    CHECK(handed->validated_version == top->version);
    CHECK(asked.size() == 3u - (top->version == last ? 1 : 0));
    CHECK(std::count(asked.begin(), asked.end(), HandOverCandidate::kValidated) ==
          (top->version == last ? 0 : 1));
    // The evaluation stands for the weights: each candidate's first weight is its mean return.
    CHECK(handed->validated->mean_return == (*top->weights)[0]);
    CHECK(handed->last.mean_return == last_weights[0]);
    CHECK(handed->average->mean_return == end.averaged[0]);
    CHECK(handed->handed_over.mean_return == handed->weights[0]);
  }
}

TEST_CASE("A failed evaluation fails the hand-over with its error", "[hand_over]") {
  absl::StatusOr<HandOverResult> handed = HandOver(
      nullptr, EndWithAverage(), HandOverOptions{},
      [](HandOverCandidate, const std::vector<float>&) -> absl::StatusOr<agent::EvalSummary> {
        return absl::InternalError("the simulator went away");
      });
  REQUIRE_FALSE(handed.ok());
  CHECK(handed.status().message() == "the simulator went away");
}

}  // namespace
}  // namespace convoy::deploy
