// Evaluation and the choice of a run's policy: fixed seeds, and BestPolicy keeping the better
// weights.
#include "agent/evaluation.h"

#include <array>
#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/str_cat.h"

#include "common/model_registry.h"
#include "common/weights_file.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

TEST_CASE("Validation seeds are fixed and disjoint from the evaluation seeds", "[evaluation]") {
  const std::vector<uint64_t> validation = ValidationSeeds(50);
  const std::vector<uint64_t> evaluation = EvaluationSeeds(50);
  CHECK(validation == ValidationSeeds(50));
  CHECK(std::vector<uint64_t>(validation.begin(), validation.begin() + 10) == ValidationSeeds(10));
  std::set<uint64_t> all(validation.begin(), validation.end());
  all.insert(evaluation.begin(), evaluation.end());
  CHECK(all.size() == 100);
}

TEST_CASE("BetterPolicy ranks full episodes first and then the mean return", "[evaluation]") {
  EvalSummary a, b;
  a.full_episodes = 3;
  a.mean_return = 100;
  b.full_episodes = 2;
  b.mean_return = 200;
  CHECK(BetterPolicy(a, b));
  CHECK_FALSE(BetterPolicy(b, a));
  b.full_episodes = 3;
  CHECK(BetterPolicy(b, a));
  CHECK_FALSE(BetterPolicy(a, a));  // A tie keeps the earlier one.
}

TEST_CASE("BestPolicy keeps the weights that validate best and writes them", "[evaluation]") {
  const std::string dir = testing::MakeTempDir("best_policy");
  const std::string path = dir + "/weights.pt";
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 10;
  absl::StatusOr<std::unique_ptr<BestPolicy>> best = BestPolicy::Create("compact", spec, 4, path);
  REQUIRE(best.ok());
  CHECK_FALSE((*best)->has_best());
  const ModelInfo model = *DescribeModel("compact");
  // Differently initialised networks steer differently, so they validate differently.
  std::vector<std::vector<float>> candidates;
  std::vector<EvalSummary> summaries;
  for (uint64_t seed : {1, 2, 3}) {
    candidates.push_back(*InitialFlatWeights("compact", kDefaultNumActions, seed));
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    absl::StatusOr<bool> better = (*best)->Consider(10 + i, candidates[i]);
    REQUIRE(better.ok());
    summaries.push_back((*best)->last());
    CHECK((*best)->considered() == static_cast<int>(i + 1));
  }
  size_t expected = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (BetterPolicy(summaries[i], summaries[expected])) expected = i;
  }
  CHECK((*best)->version() == 10 + expected);
  CHECK((*best)->weights() == candidates[expected]);
  CHECK((*best)->summary().mean_return == summaries[expected].mean_return);
  CHECK(*ReadWeightsFile(path, model.layout) == candidates[expected]);
  // The same weights again validate the same (fixed seeds, deterministic simulator) and do not
  // replace it.
  absl::StatusOr<bool> again = (*best)->Consider(99, candidates[expected]);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
  CHECK((*best)->last().mean_return == summaries[expected].mean_return);
  CHECK((*best)->version() == 10 + expected);
  // Weights of another model are refused and change nothing.
  absl::StatusOr<bool> wrong = (*best)->Consider(100, std::vector<float>(7, 0.f));
  CHECK(wrong.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK((*best)->version() == 10 + expected);
  CHECK((*best)->considered() == 4);
}

TEST_CASE("An evaluation says where each episode that did not reach the time limit ended",
          "[evaluation]") {
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 10;
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> evaluator =
      GreedyEvaluator::Create("compact", spec);
  REQUIRE(evaluator.ok());
  absl::StatusOr<EvalSummary> random = (*evaluator)->Random(8);
  REQUIRE(random.ok());
  const RoadMap& map = (*evaluator)->env().map();
  REQUIRE(map.junctions().size() == 11);  // The Neighborhood: 7 intersections, 4 corners.
  std::array<int, kRoadPlaces> counted{};
  for (const EpisodeRecord& e : random->episodes) {
    REQUIRE_FALSE(e.path.empty());
    CHECK(e.end_place == map.PlaceOf({e.path.back().first, e.path.back().second}));
    if (e.reason != TerminationReason::kTimeLimit) ++counted[static_cast<int>(e.end_place)];
  }
  CHECK(counted == random->ended_at);
  CHECK(random->ended_at[0] + random->ended_at[1] + random->ended_at[2] ==
        static_cast<int>(random->episodes.size()) - random->full_episodes);
  const std::string table = FormatComparison(*random, *random);
  CHECK_THAT(table, Catch::Contains("by where they ended") &&
                        Catch::Contains(absl::StrCat("RESULT ended_corner=", random->ended_at[1])) &&
                        Catch::Contains(absl::StrCat("RESULT random_ended_intersection=",
                                                     random->ended_at[2])));
}

}  // namespace
}  // namespace convoy
