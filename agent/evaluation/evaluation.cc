#include "agent/evaluation/evaluation.h"

#include <algorithm>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/evaluation/eval_statistics.h"
#include "agent/learning/learner.h"
#include "common/model/weights_file.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/task/expert_driver.h"
#include "simulator_bridge/task/frame_stack.h"
#include "simulator_bridge/task/scenario.h"

namespace convoy::agent {
namespace {
// Far from the seeds agents train on (seed * 1000003 + episode), and from each other.
constexpr uint64_t kFirstEvaluationSeed = 900000000001ull;
constexpr uint64_t kFirstValidationSeed = 700000000003ull;
}  // namespace

std::vector<uint64_t> EvaluationSeeds(int episodes) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < episodes; ++i) seeds.push_back(kFirstEvaluationSeed + 7919ull * i);
  return seeds;
}

std::vector<uint64_t> ValidationSeeds(int episodes) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < episodes; ++i) seeds.push_back(kFirstValidationSeed + 7919ull * i);
  return seeds;
}

bool BetterPolicy(const EvalSummary& a, const EvalSummary& b) {
  if (a.mean_driving_score != b.mean_driving_score) {
    return a.mean_driving_score > b.mean_driving_score;
  }
  if (a.full_episodes != b.full_episodes) return a.full_episodes > b.full_episodes;
  return a.mean_return > b.mean_return;
}

EvalSummary SummaryOf(std::vector<EpisodeRecord> episodes) {
  EvalSummary summary;
  for (const EpisodeRecord& record : episodes) {
    summary.mean_return += record.total_return;
    summary.mean_driving_score += DrivingScore(record);
    summary.mean_distance_m += record.distance_m;
    summary.collisions += record.collided ? 1 : 0;
    if (record.completed) {
      ++summary.full_episodes;
    } else {
      ++summary.ended_at[static_cast<int>(record.end_place)];
    }
  }
  if (!episodes.empty()) {
    summary.mean_return /= episodes.size();
    summary.mean_driving_score /= episodes.size();
    summary.mean_distance_m /= episodes.size();
  }
  summary.episodes = std::move(episodes);
  return summary;
}

absl::StatusOr<EvalSummary> Evaluate(sim::DrivingEnv& env, const Preprocess& preprocess,
                                     int frame_stack, const Policy& policy,
                                     const std::vector<uint64_t>& seeds,
                                     const StepObserver& observer) {
  std::vector<uint8_t> frame(env.observation_size()), model_frame(preprocess.output_size());
  sim::FrameStack stack(preprocess.output_size(), frame_stack);
  std::vector<EpisodeRecord> episodes;
  for (uint64_t seed : seeds) {
    EpisodeRecord record;
    record.seed = seed;
    absl::StatusOr<sim::StepResult> step = env.Reset(seed, frame.data());
    if (!step.ok()) return step.status();
    preprocess.Apply(frame.data(), model_frame.data());
    stack.Reset(model_frame.data());
    record.path.emplace_back(step->car.x, step->car.y);
    while (true) {
      const int action = policy(stack.data());
      step = env.Step(action, frame.data());
      if (!step.ok()) return step.status();
      preprocess.Apply(frame.data(), model_frame.data());
      stack.Push(model_frame.data());
      record.total_return += step->reward;
      ++record.steps;
      record.path.emplace_back(step->car.x, step->car.y);
      if (observer) {
        if (absl::Status s = observer({seed, record.steps, action, &*step, frame.data()});
            !s.ok()) {
          return s;
        }
      }
      if (step->done) {
        record.distance_m = step->car.distance_driven_m;
        record.reason = step->reason;
        record.completed = sim::IsSuccess(step->reason, env.options());
        record.route_completion = sim::TaskCompletion(step->reason, step->car, env.options());
        record.collided = step->reason == sim::TerminationReason::kCollision;
        if (record.collided) record.collided_with = step->car.collided_with;
        break;
      }
    }
    record.end_place = env.map().PlaceOf({record.path.back().first, record.path.back().second});
    episodes.push_back(std::move(record));
  }
  return SummaryOf(std::move(episodes));
}

Policy RandomPolicy(int num_actions, uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, num_actions](const uint8_t*) {
    return std::uniform_int_distribution<int>(0, num_actions - 1)(*rng);
  };
}

absl::StatusOr<std::unique_ptr<GreedyEvaluator>> GreedyEvaluator::Create(
    const std::string& model, const EnvironmentSpec& spec) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<Environment> environment, MakeEnvironment(spec));
  sim::DrivingEnv& env = *environment->env;
  LearnerOptions options;
  options.model = model;
  options.num_actions = env.num_actions();
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DqnLearner> learner, DqnLearner::Create(options));
  const ModelSpec& m = learner->model().spec;
  const std::array<int, 3> shape = env.observation_shape();
  CONVOY_ASSIGN_OR_RETURN(Preprocess preprocess,
                          Preprocess::Create(shape, {shape[0], m.height, m.width}));
  return std::unique_ptr<GreedyEvaluator>(
      new GreedyEvaluator(spec.scenario, std::move(environment), std::move(learner),
                          std::move(preprocess), m.channels / shape[0]));
}

GreedyEvaluator::GreedyEvaluator(std::string scenario, std::unique_ptr<Environment> environment,
                                 std::unique_ptr<DqnLearner> learner, Preprocess preprocess,
                                 int frame_stack)
    : scenario_(std::move(scenario)),
      environment_(std::move(environment)),
      learner_(std::move(learner)),
      preprocess_(std::move(preprocess)),
      frame_stack_(frame_stack) {}

GreedyEvaluator::~GreedyEvaluator() = default;

absl::StatusOr<EvalSummary> GreedyEvaluator::Greedy(const std::vector<float>& weights,
                                                    int episodes) {
  return Greedy(weights, EvaluationSeeds(episodes));
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Greedy(const std::vector<float>& weights,
                                                    const std::vector<uint64_t>& seeds,
                                                    const StepObserver& observer) {
  if (weights.size() != learner_->model().parameter_count) {
    return absl::InvalidArgumentError(absl::StrCat("weights have ", weights.size(),
                                                   " elements, the model ",
                                                   learner_->model().parameter_count));
  }
  learner_->SetWeights(weights);
  DqnLearner* learner = learner_.get();
  return Run([this, learner](const uint8_t* obs) { return learner->QValues(obs, &q_values_); },
             seeds, observer);
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Run(const Policy& policy,
                                                 const std::vector<uint64_t>& seeds,
                                                 const StepObserver& observer) {
  CONVOY_ASSIGN_OR_RETURN(EvalSummary summary, Evaluate(*environment_->env, preprocess_,
                                                        frame_stack_, policy, seeds, observer));
  summary.scenario = scenario_;
  return summary;
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Random(int episodes) {
  return Random(EvaluationSeeds(episodes));
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Random(const std::vector<uint64_t>& seeds) {
  return Run(RandomPolicy(environment_->env->num_actions(), 12345), seeds);
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Expert(int episodes, double sight_m) {
  return Expert(EvaluationSeeds(episodes), sight_m);
}

absl::StatusOr<EvalSummary> GreedyEvaluator::Expert(const std::vector<uint64_t>& seeds,
                                                    double sight_m) {
  sim::DrivingEnv& env = *environment_->env;
  const sim::ExpertDriver expert(env.map());
  absl::Status failed;
  // The simulator's error, if any, ends the episode at the next Step too; it is reported there.
  CONVOY_ASSIGN_OR_RETURN(EvalSummary summary, Run(
                                                   [&](const uint8_t*) {
                                                     absl::StatusOr<int> action =
                                                         expert.Act(env, sight_m);
                                                     if (!action.ok()) failed = action.status();
                                                     return action.value_or(0);
                                                   },
                                                   seeds));
  CONVOY_RETURN_IF_ERROR(failed);
  return summary;
}

absl::StatusOr<std::unique_ptr<BestPolicy>> BestPolicy::Create(const std::string& model,
                                                               const EnvironmentSpec& spec,
                                                               int episodes, std::string path) {
  CONVOY_ASSIGN_OR_RETURN(ModelInfo info, DescribeModel(model));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<GreedyEvaluator> evaluator,
                          GreedyEvaluator::Create(model, spec));
  return std::unique_ptr<BestPolicy>(new BestPolicy(std::move(evaluator), ValidationSeeds(episodes),
                                                    std::move(path), std::move(info.layout)));
}

BestPolicy::BestPolicy(std::unique_ptr<GreedyEvaluator> evaluator, std::vector<uint64_t> seeds,
                       std::string path, std::vector<ParameterSlot> layout)
    : evaluator_(std::move(evaluator)),
      seeds_(std::move(seeds)),
      path_(std::move(path)),
      layout_(std::move(layout)) {}

absl::StatusOr<EvalSummary> BestPolicy::RandomBaseline() { return evaluator_->Random(seeds_); }

absl::StatusOr<EvalSummary> BestPolicy::ExpertBaseline() { return evaluator_->Expert(seeds_); }

absl::StatusOr<bool> BestPolicy::Consider(uint64_t version, const std::vector<float>& weights) {
  CONVOY_ASSIGN_OR_RETURN(EvalSummary summary, evaluator_->Greedy(weights, seeds_));
  ++considered_;
  last_ = summary;
  Candidate candidate{version, std::move(summary), weights};
  // Among the leaders, after those it does not beat (an equal one does not displace an earlier
  // one).
  auto at = std::find_if(leaders_.begin(), leaders_.end(), [&](const Candidate& c) {
    return BetterPolicy(candidate.summary, c.summary);
  });
  const bool best = at == leaders_.begin();
  if (at - leaders_.begin() < kCandidates) {
    leaders_.insert(at, candidate);
    if (leaders_.size() > static_cast<size_t>(kCandidates)) leaders_.pop_back();
    latest_.reset();
  } else {
    latest_ = std::move(candidate);
  }
  if (!best) return false;
  CONVOY_RETURN_IF_ERROR(Keep(leaders_.front()));
  return true;
}

absl::StatusOr<bool> BestPolicy::ConsiderAverage(uint64_t version,
                                                 const std::vector<float>& weights) {
  CONVOY_ASSIGN_OR_RETURN(EvalSummary summary, evaluator_->Greedy(weights, seeds_));
  last_ = summary;
  average_ = Candidate{version, std::move(summary), weights, /*averaged=*/true};
  if (has_best_ && !BetterPolicy(average_->summary, summary_)) return false;
  CONVOY_RETURN_IF_ERROR(Keep(*average_));
  return true;
}

absl::Status BestPolicy::Keep(const Candidate& chosen) {
  has_best_ = true;
  version_ = chosen.version;
  averaged_ = chosen.averaged;
  summary_ = chosen.summary;
  weights_ = chosen.weights;
  if (path_.empty()) return absl::OkStatus();
  return WriteWeightsFile(path_, weights_.data(), layout_);
}

std::string BestPolicy::NameOf(uint64_t version, bool averaged) {
  return averaged ? absl::StrCat("the average as of v", version) : absl::StrCat("v", version);
}

std::vector<std::string> BestPolicy::candidate_names() const {
  std::vector<std::string> names;
  for (const Candidate& c : leaders_) names.push_back(NameOf(c.version, c.averaged));
  if (latest_.has_value()) names.push_back(NameOf(latest_->version, false));
  if (average_.has_value()) names.push_back(NameOf(average_->version, true));
  return names;
}

std::optional<BestPolicy::Validated> BestPolicy::best_validated() const {
  const Candidate* best = nullptr;
  for (const Candidate& c : leaders_) {
    if (best == nullptr || BetterPolicy(c.summary, best->summary)) best = &c;
  }
  if (latest_.has_value() && (best == nullptr || BetterPolicy(latest_->summary, best->summary))) {
    best = &*latest_;
  }
  if (best == nullptr) return std::nullopt;
  return Validated{best->version, &best->weights, &best->summary};
}

absl::StatusOr<bool> BestPolicy::Settle(int extra_episodes) {
  std::vector<Candidate*> candidates;
  for (Candidate& c : leaders_) candidates.push_back(&c);
  if (latest_.has_value()) candidates.push_back(&*latest_);
  if (average_.has_value()) candidates.push_back(&*average_);
  if (candidates.size() < 2 || extra_episodes <= 0) return false;
  const std::vector<uint64_t> all =
      ValidationSeeds(static_cast<int>(seeds_.size()) + extra_episodes);
  const std::vector<uint64_t> more(all.begin() + seeds_.size(), all.end());
  Candidate* chosen = nullptr;
  for (Candidate* c : candidates) {
    // On the new seeds alone: the versions kept are those the first seeds flattered most.
    CONVOY_ASSIGN_OR_RETURN(c->summary, evaluator_->Greedy(c->weights, more));
    if (chosen == nullptr || BetterPolicy(c->summary, chosen->summary)) chosen = c;
  }
  const bool changed = chosen->version != version_ || chosen->averaged != averaged_;
  CONVOY_RETURN_IF_ERROR(Keep(*chosen));
  return changed;
}

absl::StatusOr<Comparison> CompareWithRandom(const std::string& model,
                                             const std::vector<float>& weights,
                                             const EnvironmentSpec& spec, int episodes,
                                             bool with_expert) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<GreedyEvaluator> evaluator,
                          GreedyEvaluator::Create(model, spec));
  CONVOY_ASSIGN_OR_RETURN(EvalSummary greedy, evaluator->Greedy(weights, episodes));
  CONVOY_ASSIGN_OR_RETURN(EvalSummary random, evaluator->Random(episodes));
  EvalSummary expert;
  if (with_expert) {
    CONVOY_ASSIGN_OR_RETURN(expert, evaluator->Expert(episodes));
  }
  return Comparison{std::move(greedy), std::move(random), std::move(expert)};
}

std::string FormatComparison(const EvalSummary& greedy, const EvalSummary& random,
                             const EvalSummary* expert) {
  std::string out;
  if (!greedy.scenario.empty()) {
    absl::StatusOr<sim::Scenario> scenario = sim::FindScenario(greedy.scenario);
    absl::StrAppendFormat(&out, "\nscenario: %s%s\n", greedy.scenario,
                          scenario.ok() ? absl::StrCat(" (", scenario->summary, ")") : "");
  }
  absl::StrAppendFormat(&out, "\n%-16s %12s %18s %12s %16s\n", "policy", "mean return",
                        "mean distance (m)", "collisions", "completed");
  auto row = [&](const char* name, const EvalSummary& s) {
    absl::StrAppendFormat(&out, "%-16s %12.2f %18.1f %9d/%-2d %13d/%-2d\n", name, s.mean_return,
                          s.mean_distance_m, s.collisions, static_cast<int>(s.episodes.size()),
                          s.full_episodes, static_cast<int>(s.episodes.size()));
  };
  row("greedy (learned)", greedy);
  row("random", random);
  if (expert != nullptr) row("scripted expert", *expert);
  absl::StrAppendFormat(&out,
                        "\nepisodes not completed, by where they ended (%.0f m of "
                        "a junction counts as it)\n%-16s %12s %12s %14s\n",
                        sim::RoadMap::kJunctionRadiusM, "policy", "straight", "corner",
                        "intersection");
  auto ends = [&](const char* name, const EvalSummary& s) {
    absl::StrAppendFormat(&out, "%-16s %12d %12d %14d\n", name, s.ended_at[0], s.ended_at[1],
                          s.ended_at[2]);
  };
  ends("greedy (learned)", greedy);
  ends("random", random);
  if (expert != nullptr) ends("scripted expert", *expert);
  absl::StrAppendFormat(&out, "\nRESULT mean_return=%.3f\n", greedy.mean_return);
  absl::StrAppendFormat(&out, "RESULT random_mean_return=%.3f\n", random.mean_return);
  absl::StrAppendFormat(&out, "RESULT mean_distance_m=%.2f\n", greedy.mean_distance_m);
  absl::StrAppendFormat(&out, "RESULT random_mean_distance_m=%.2f\n", random.mean_distance_m);
  absl::StrAppendFormat(&out, "RESULT collisions=%d\n", greedy.collisions);
  absl::StrAppendFormat(&out, "RESULT random_collisions=%d\n", random.collisions);
  absl::StrAppendFormat(&out, "RESULT full_episodes=%d\n", greedy.full_episodes);
  absl::StrAppendFormat(&out, "RESULT episodes=%d\n", static_cast<int>(greedy.episodes.size()));
  for (int place = 0; place < sim::kRoadPlaces; ++place) {
    const char* name = sim::RoadPlaceName(static_cast<sim::RoadPlace>(place));
    absl::StrAppendFormat(&out, "RESULT ended_%s=%d\nRESULT random_ended_%s=%d\n", name,
                          greedy.ended_at[place], name, random.ended_at[place]);
  }
  return out + FormatStatistics(greedy, random, expert);
}

}  // namespace convoy::agent
