// Evaluation and the choice of a run's policy: fixed seeds, and BestPolicy keeping the better
// weights.
#include "agent/evaluation/evaluation.h"

#include <algorithm>
#include <array>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/evaluation/eval_statistics.h"
#include "agent/evaluation/eval_trace.h"
#include "common/model/model_registry.h"
#include "common/model/weights_file.h"
#include "common/support/files.h"
#include "simulator_bridge/world/png.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::agent {
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

TEST_CASE("BetterPolicy ranks the driving score first, then full episodes, then the mean return",
          "[evaluation]") {
  EvalSummary a, b;
  a.mean_driving_score = 0.7;
  a.full_episodes = 3;
  a.mean_return = 100;
  b.mean_driving_score = 0.6;
  b.full_episodes = 5;
  b.mean_return = 300;
  CHECK(BetterPolicy(a, b));  // More episodes completed do not outrank a better driving score.
  CHECK_FALSE(BetterPolicy(b, a));
  b.mean_driving_score = 0.7;
  CHECK(BetterPolicy(b, a));
  b.full_episodes = 3;
  CHECK_FALSE(BetterPolicy(a, b));
  b.mean_return = 50;
  CHECK(BetterPolicy(a, b));
  CHECK_FALSE(BetterPolicy(a, a));  // A tie keeps the earlier one.
}

TEST_CASE("A summary's mean driving score is the mean of its episodes' driving scores",
          "[evaluation]") {
  EpisodeRecord done, crashed;
  done.completed = true;
  done.route_completion = 1;
  crashed.collided = true;
  crashed.collided_with = "stalled_car_3";
  crashed.reason = sim::TerminationReason::kCollision;
  crashed.route_completion = 0.5;
  const EvalSummary summary = SummaryOf({done, crashed});
  CHECK(summary.mean_driving_score == Approx((DrivingScore(done) + DrivingScore(crashed)) / 2));
  CHECK(summary.mean_driving_score < 0.9);  // The crash's half route, and its penalty.
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

TEST_CASE(
    "Settle drives the runners-up, the latest and the average over more seeds, choosing on those",
    "[evaluation]") {
  const std::string dir = testing::MakeTempDir("best_policy_settle");
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 5;
  absl::StatusOr<std::unique_ptr<BestPolicy>> best =
      BestPolicy::Create("compact", spec, 3, dir + "/weights.pt");
  REQUIRE(best.ok());
  std::vector<std::vector<float>> candidates;
  std::vector<EvalSummary> first;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    candidates.push_back(*InitialFlatWeights("compact", kDefaultNumActions, seed));
    REQUIRE((*best)->Consider(seed, candidates.back()).ok());
    first.push_back((*best)->last());
  }
  // The kept: the 3 best of the 3-episode validations (the earlier first on a tie), then the
  // latest.
  std::vector<uint64_t> order = {1, 2, 3, 4, 5, 6};
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return BetterPolicy(first[a - 1], first[b - 1]);
  });
  std::vector<uint64_t> kept(order.begin(), order.begin() + BestPolicy::kCandidates);
  if (std::find(kept.begin(), kept.end(), 6) == kept.end()) kept.push_back(6);
  CHECK((*best)->version() == kept[0]);
  const EvalSummary leader = (*best)->summary();
  // The averaged network, as of the latest's version 6: a candidate of its own (index 7 below).
  candidates.push_back(*InitialFlatWeights("compact", kDefaultNumActions, 7));
  absl::StatusOr<bool> average_best = (*best)->ConsiderAverage(6, candidates.back());
  REQUIRE(average_best.ok());
  CHECK(*average_best == BetterPolicy((*best)->last(), leader));
  CHECK((*best)->averaged() == *average_best);
  std::vector<std::string> names;
  for (uint64_t v : kept) names.push_back(BestPolicy::NameOf(v, false));
  names.push_back("the average as of v6");
  REQUIRE((*best)->candidate_names() == names);
  kept.push_back(7);
  const uint64_t first_best = *average_best ? 7 : kept[0];

  // Each candidate on the 4 validation seeds after the first 3, driven here by an evaluator of its
  // own.
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> judge = GreedyEvaluator::Create("compact", spec);
  REQUIRE(judge.ok());
  const std::vector<uint64_t> seven = ValidationSeeds(7);
  const std::vector<uint64_t> fresh(seven.begin() + 3, seven.end());
  uint64_t expected = 0;
  EvalSummary expected_summary;
  for (uint64_t v : kept) {
    absl::StatusOr<EvalSummary> all = (*judge)->Greedy(candidates[v - 1], fresh);
    REQUIRE(all.ok());
    if (expected == 0 || BetterPolicy(*all, expected_summary)) {
      expected = v;
      expected_summary = *all;
    }
  }
  absl::StatusOr<bool> changed = (*best)->Settle(4);
  REQUIRE(changed.ok());
  CHECK(*changed == (expected != first_best));
  CHECK((*best)->averaged() == (expected == 7));
  CHECK((*best)->version() == (expected == 7 ? 6 : expected));
  CHECK((*best)->weights() == candidates[expected - 1]);
  CHECK((*best)->summary().episodes.size() == 4);
  CHECK((*best)->summary().full_episodes == expected_summary.full_episodes);
  CHECK((*best)->summary().mean_return == Approx(expected_summary.mean_return));
  CHECK(*ReadWeightsFile(dir + "/weights.pt", DescribeModel("compact")->layout) ==
        candidates[expected - 1]);
  // Nothing to compare without more episodes.
  CHECK_FALSE(*(*best)->Settle(0));
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
  const sim::RoadMap& map = (*evaluator)->env().map();
  REQUIRE(map.junctions().size() == 11);  // The Neighborhood: 7 intersections, 4 corners.
  std::array<int, sim::kRoadPlaces> counted{};
  for (const EpisodeRecord& e : random->episodes) {
    REQUIRE_FALSE(e.path.empty());
    CHECK(e.end_place == map.PlaceOf({e.path.back().first, e.path.back().second}));
    if (e.reason != sim::TerminationReason::kTimeLimit) ++counted[static_cast<int>(e.end_place)];
  }
  CHECK(counted == random->ended_at);
  CHECK(random->ended_at[0] + random->ended_at[1] + random->ended_at[2] ==
        static_cast<int>(random->episodes.size()) - random->full_episodes);
  const std::string table = FormatComparison(*random, *random);
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("by where they ended") &&
                        Catch::Matchers::ContainsSubstring(
                            absl::StrCat("RESULT ended_corner=", random->ended_at[1])) &&
                        Catch::Matchers::ContainsSubstring(absl::StrCat(
                            "RESULT random_ended_intersection=", random->ended_at[2])));
}

TEST_CASE("A trace records every greedy step with its Q-values and the frames before early ends",
          "[evaluation]") {
  const std::string dir = testing::MakeTempDir("eval_trace");
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 10;
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> evaluator =
      GreedyEvaluator::Create("compact", spec);
  REQUIRE(evaluator.ok());
  sim::DrivingEnv& env = (*evaluator)->env();
  absl::StatusOr<std::unique_ptr<EvalTrace>> trace = EvalTrace::Create(
      dir + "/trace.csv", dir + "/frames", env.map(), env.observation_shape(), env.num_actions());
  REQUIRE(trace.ok());
  const std::vector<float> weights = *InitialFlatWeights("compact", kDefaultNumActions, 2);
  absl::StatusOr<EvalSummary> summary =
      (*evaluator)->Greedy(weights, EvaluationSeeds(4), [&](const EvalStep& step) {
        return (*trace)->Observe(step, (*evaluator)->q_values());
      });
  REQUIRE(summary.ok());
  REQUIRE((*trace)->Close().ok());
  // The same weights without a trace drive the same episodes.
  absl::StatusOr<EvalSummary> plain = (*evaluator)->Greedy(weights, EvaluationSeeds(4));
  REQUIRE(plain.ok());
  CHECK(plain->mean_return == summary->mean_return);

  std::vector<std::string> lines = absl::StrSplit(testing::ReadWholeFile(dir + "/trace.csv"), '\n');
  REQUIRE(lines.back().empty());
  lines.pop_back();
  REQUIRE(
      lines[0] ==
      "seed,step,x,y,yaw,speed,distance_to_center_m,place,action,q_0,q_1,q_2,q_3,q_4,reward,end");
  size_t row = 1;
  int early = 0;
  for (const EpisodeRecord& e : summary->episodes) {
    for (int step = 1; step <= e.steps; ++step, ++row) {
      REQUIRE(row < lines.size());
      const std::vector<std::string> f = absl::StrSplit(lines[row], ',');
      REQUIRE(f.size() == 16);
      CHECK(f[0] == absl::StrCat(e.seed));
      CHECK(f[1] == absl::StrCat(step));
      // The action is the greedy one of the Q-values beside it.
      std::vector<double> q;
      for (int a = 0; a < 5; ++a) q.push_back(std::stod(f[9 + a]));
      CHECK(std::stoi(f[8]) == std::max_element(q.begin(), q.end()) - q.begin());
      if (step < e.steps) {
        CHECK(f[15].empty());
      } else {
        CHECK(f[15] == sim::TerminationReasonName(e.reason));
        CHECK(f[7] == sim::RoadPlaceName(e.end_place));
      }
    }
    if (e.reason == sim::TerminationReason::kTimeLimit) continue;
    ++early;
    const std::string png = absl::StrCat(dir, "/frames/episode-", e.seed, "-",
                                         sim::TerminationReasonName(e.reason), ".png");
    absl::StatusOr<std::string> bytes = ReadFileToString(png);
    REQUIRE(bytes.ok());
    int width = 0, height = 0, channels = 0;
    REQUIRE(sim::DecodePng(std::vector<uint8_t>(bytes->begin(), bytes->end()), &width, &height,
                           &channels)
                .ok());
    int frames = 0;
    for (int back : EvalTrace::kFramesBeforeEnd) frames += back <= e.steps ? 1 : 0;
    CHECK(width == env.observation_shape()[2]);
    CHECK(height == frames * env.observation_shape()[1]);
    CHECK(channels == 3);
  }
  CHECK(row == lines.size());
  CHECK(early == 4 - summary->full_episodes);
  CHECK(early > 0);  // Untrained weights end early; otherwise no frames were checked.
}

}  // namespace
}  // namespace convoy::agent
