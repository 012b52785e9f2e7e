#include "agent/learning/learner.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "tests/catch.h"
#include "tests/skip.h"

namespace convoy::agent {
namespace {

LearnerOptions TinyOptions() {
  LearnerOptions o;
  o.model = "tiny";
  o.learning_rate = 1e-2;
  return o;
}

struct Batch {
  torch::Tensor obs, next_obs, actions, returns, discounts, weights;
};

Batch RandomBatch(int n, uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.obs = torch::randint(0, 256, {n, 3, 16, 16}).to(torch::kUInt8);
  b.next_obs = torch::randint(0, 256, {n, 3, 16, 16}).to(torch::kUInt8);
  b.actions = torch::randint(0, kDefaultNumActions, {n}, torch::kInt64);
  b.returns = torch::rand({n});
  b.discounts = torch::zeros({n});
  b.weights = torch::ones({n});
  return b;
}

// The batch on `device`, where the agent's BatchSampler delivers it.
Batch To(const Batch& b, const torch::Device& device) {
  return {b.obs.to(device),     b.next_obs.to(device),  b.actions.to(device),
          b.returns.to(device), b.discounts.to(device), b.weights.to(device)};
}

TrainStats Accumulate(DqnLearner& learner, const Batch& b) {
  return learner.Accumulate(b.obs, b.next_obs, b.actions, b.returns, b.discounts, b.weights);
}

// Trains on one batch with zero discounts; returns the loss before and after `steps` local steps
// and, in `applied`, how many of them were applied (AMP skips a step whose gradient overflowed).
std::pair<double, double> Regress(DqnLearner& learner, const Batch& b, int steps, int* applied) {
  const double first = Accumulate(learner, b).loss;
  *applied = learner.StepLocal() ? 1 : 0;
  double last = first;
  for (int i = 0; i < steps; ++i) {
    last = Accumulate(learner, b).loss;
    if (learner.StepLocal()) ++*applied;
  }
  return {first, last};
}

TEST_CASE("The learner's fingerprint is the registry's so the server accepts it", "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  CHECK(learner->model().fingerprint == DescribeModel("tiny")->fingerprint);
  CHECK(learner->model().parameter_count == DescribeModel("tiny")->parameter_count);
}

TEST_CASE("With zero discounts Q-values regress onto the returns", "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  const Batch b = RandomBatch(16, 1);
  int applied = 0;
  const auto [first, last] = Regress(*learner, b, 300, &applied);
  CHECK(applied == 301);
  CHECK(last < first / 20);
  const TrainStats stats = Accumulate(*learner, b);
  for (float td : stats.td_errors) CHECK(td < 0.1f);
}

TEST_CASE("The pushed gradient is the mean of the accumulated minibatches", "[learner]") {
  LearnerOptions o = TinyOptions();
  o.max_grad_norm = 0;  // Compare raw means.
  auto learner = *DqnLearner::Create(o);
  const Batch a = RandomBatch(8, 2), b = RandomBatch(8, 3);
  std::vector<float> ga, gb, mean;
  Accumulate(*learner, a);
  REQUIRE(learner->TakeMeanGradient(&ga));
  Accumulate(*learner, b);
  REQUIRE(learner->TakeMeanGradient(&gb));
  Accumulate(*learner, a);
  Accumulate(*learner, b);
  CHECK(learner->accumulated() == 2);
  REQUIRE(learner->TakeMeanGradient(&mean));
  CHECK(learner->accumulated() == 0);
  REQUIRE(mean.size() == ga.size());
  double nonzero = 0;
  for (size_t i = 0; i < mean.size(); ++i) {
    REQUIRE(mean[i] == Approx((ga[i] + gb[i]) / 2).margin(1e-6));
    nonzero += std::fabs(mean[i]);
  }
  CHECK(nonzero > 0);
}

TEST_CASE("Gradient clipping bounds the pushed gradient's norm", "[learner]") {
  LearnerOptions o = TinyOptions();
  o.max_grad_norm = 1e-3;
  auto learner = *DqnLearner::Create(o);
  Batch b = RandomBatch(8, 4);
  b.returns = b.returns * 100;  // A large error, a large gradient.
  Accumulate(*learner, b);
  std::vector<float> g;
  REQUIRE(learner->TakeMeanGradient(&g));
  double norm = 0;
  for (float v : g) norm += static_cast<double>(v) * v;
  CHECK(std::sqrt(norm) <= 1e-3 * 1.01);
}

TEST_CASE("Double DQN bootstraps from the target network's value of the online argmax",
          "[learner]") {
  LearnerOptions o = TinyOptions();
  auto learner = *DqnLearner::Create(o);
  // Target network with all-zero weights values every action at 0: the bootstrap term vanishes, so
  // the TD error is |return - Q| whatever the discount.
  std::vector<float> weights, zeros;
  learner->GetWeights(&weights);
  zeros.assign(weights.size(), 0.0f);
  learner->SetTargetWeights(zeros);
  Batch b = RandomBatch(4, 5);
  b.discounts = torch::ones({4});
  const TrainStats with_discount = Accumulate(*learner, b);
  learner->TakeMeanGradient(&weights);
  b.discounts = torch::zeros({4});
  const TrainStats without = Accumulate(*learner, b);
  for (size_t i = 0; i < 4; ++i) CHECK(with_discount.td_errors[i] == Approx(without.td_errors[i]));
}

TEST_CASE("A soft target update moves the target tau of the way toward the online network",
          "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  std::vector<float> online, target;
  learner->GetWeights(&online);
  REQUIRE(online.size() > 10);
  learner->SetTargetWeights(std::vector<float>(online.size(), 0.0f));
  learner->MoveTargetTowardOnline(0.25);
  learner->GetTargetWeights(&target);
  REQUIRE(target.size() == online.size());
  for (size_t i = 0; i < online.size(); ++i) CHECK(target[i] == Approx(0.25 * online[i]));
  learner->MoveTargetTowardOnline(0.25);  // From where the last move left it: 0.25 + 0.75 * 0.25.
  learner->GetTargetWeights(&target);
  for (size_t i = 0; i < online.size(); ++i) CHECK(target[i] == Approx(0.4375 * online[i]));
  std::vector<float> unchanged;
  learner->GetWeights(&unchanged);
  CHECK(unchanged == online);
  learner->MoveTargetTowardOnline(1.0);  // A plain copy.
  learner->GetTargetWeights(&target);
  CHECK(target == online);
}

TEST_CASE("A quantile learner learns a return's spread, not only its mean", "[learner]") {
  LearnerOptions o = TinyOptions();
  o.model = "tiny_qr";
  auto learner = *DqnLearner::Create(o);
  // One observation, one action, a terminal step whose return is 0 or 1, each half the time.
  Batch b = RandomBatch(16, 11);
  b.obs = b.obs.narrow(0, 0, 1).expand({16, 3, 16, 16}).contiguous();
  b.actions = torch::full({16}, 2, torch::kInt64);
  b.returns = (torch::arange(16) % 2).to(torch::kFloat32);
  int applied = 0;
  const auto [first, last] = Regress(*learner, b, 400, &applied);
  CHECK(applied == 401);
  CHECK(last < first);
  std::vector<float> q;
  learner->QValues(b.obs.narrow(0, 0, 1).contiguous().data_ptr<uint8_t>(), &q);
  CHECK(q[2] == Approx(0.5).margin(0.1));
  // The quantiles below the median near 0, those above near 1: a spread no Q-value holds.
  QNetwork net = *BuildQNetwork(*ResolveModel("tiny_qr"), 1);
  std::vector<float> weights;
  learner->GetWeights(&weights);
  REQUIRE(LoadFlatParameters(weights.data(), weights.size(), *net).ok());
  net->eval();
  const torch::Tensor z =
      net->quantiles(b.obs.narrow(0, 0, 1).to(torch::kFloat32).div(255.0f))[0][2];
  CHECK(z.narrow(0, 0, kQuantiles / 4).mean().item<float>() < 0.2f);
  CHECK(z.narrow(0, 3 * kQuantiles / 4, kQuantiles / 4).mean().item<float>() > 0.8f);
  // Prioritized replay reads the TD error of the means: |return - 0.5| for every sample here.
  const TrainStats stats = Accumulate(*learner, b);
  for (float td : stats.td_errors) CHECK(td == Approx(0.5).margin(0.1));
}

TEST_CASE("Weights set on the learner read back exactly", "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  std::vector<float> w(learner->model().parameter_count);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.001f * static_cast<float>(i % 97);
  learner->SetWeights(w);
  std::vector<float> back;
  learner->GetWeights(&back);
  CHECK(back == w);
}

TEST_CASE("On CUDA the pushed gradient is the CPU's", "[learner][cuda]") {
  if (!torch::cuda::is_available()) CONVOY_SKIP("no CUDA device on this machine");
  LearnerOptions o = TinyOptions();
  o.max_grad_norm = 0;  // Compare raw means.
  auto cpu = *DqnLearner::Create(o);
  o.device = torch::Device(torch::kCUDA, 0);
  auto cuda = *DqnLearner::Create(o);  // The same seed: the same initial weights.
  REQUIRE(cuda->device().is_cuda());
  Batch b = RandomBatch(16, 8);
  b.discounts = torch::full({16}, 0.9f);  // The target network's values count too.
  std::vector<float> g_cpu, g_cuda;
  const TrainStats stats_cpu = Accumulate(*cpu, b);
  REQUIRE(cpu->TakeMeanGradient(&g_cpu));
  const TrainStats stats_cuda = Accumulate(*cuda, To(b, o.device));
  REQUIRE(cuda->TakeMeanGradient(&g_cuda));
  REQUIRE(g_cuda.size() == g_cpu.size());
  // cuDNN may convolve in TF32 (10-bit mantissa): the same gradient to about 1e-3, not bit for bit.
  double difference = 0, norm = 0;
  for (size_t i = 0; i < g_cpu.size(); ++i) {
    difference += std::pow(static_cast<double>(g_cuda[i]) - g_cpu[i], 2);
    norm += std::pow(static_cast<double>(g_cpu[i]), 2);
  }
  REQUIRE(norm > 0);
  CHECK(std::sqrt(difference / norm) < 1e-2);
  CHECK(stats_cuda.loss == Approx(stats_cpu.loss).epsilon(1e-2));
  REQUIRE(stats_cuda.td_errors.size() == stats_cpu.td_errors.size());
  for (size_t i = 0; i < stats_cpu.td_errors.size(); ++i) {
    CHECK(stats_cuda.td_errors[i] == Approx(stats_cpu.td_errors[i]).margin(1e-2));
  }
}

TEST_CASE("On CUDA Q-values regress onto the returns, in fp32 and with mixed precision",
          "[learner][cuda]") {
  if (!torch::cuda::is_available()) CONVOY_SKIP("no CUDA device on this machine");
  for (const bool amp : {false, true}) {
    INFO("amp: " << amp);
    LearnerOptions o = TinyOptions();
    o.device = torch::Device(torch::kCUDA, 0);
    o.amp = amp;
    auto learner = *DqnLearner::Create(o);
    const Batch b = To(RandomBatch(16, 1), o.device);
    int applied = 0;
    const auto [first, last] = Regress(*learner, b, 300, &applied);
    // AMP starts its loss scale high and halves it on each overflow: a few skipped steps at most.
    CHECK(applied > 280);
    CHECK(last < first / 20);
    std::vector<float> weights;
    learner->GetWeights(&weights);
    REQUIRE(weights.size() == learner->model().parameter_count);
    CHECK(std::all_of(weights.begin(), weights.end(), [](float w) { return std::isfinite(w); }));
    std::vector<float> q;
    const torch::Tensor obs = b.obs[0].to(torch::kCPU).contiguous();
    const int greedy = learner->QValues(obs.data_ptr<uint8_t>(), &q);
    REQUIRE(q.size() == static_cast<size_t>(kDefaultNumActions));
    CHECK(greedy == learner->GreedyAction(obs.data_ptr<uint8_t>()));
  }
}

TEST_CASE("Mixed precision without CUDA is refused", "[learner]") {
  LearnerOptions o = TinyOptions();
  o.amp = true;
  CHECK(DqnLearner::Create(o).status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("Mirror augmentation learns from every other sample seen in a mirror", "[learner]") {
  LearnerOptions plain = TinyOptions();
  plain.max_grad_norm = 0;
  LearnerOptions mirrored = plain;
  mirrored.mirror_actions = {4, 3, 2, 1, 0};
  auto with = *DqnLearner::Create(mirrored);
  auto without = *DqnLearner::Create(plain);  // The same seed: the same initial weights.
  Batch b = RandomBatch(6, 6);
  b.discounts = torch::full({6}, 0.9f);  // The next observations count too.
  b.actions = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 0});
  // The batch as the mirror sees it: rows 1, 3 and 5 flipped left to right, their steering negated.
  Batch m = b;
  m.obs = b.obs.clone();
  m.next_obs = b.next_obs.clone();
  for (int64_t row : {1, 3, 5}) {
    m.obs[row].copy_(b.obs[row].flip({2}));
    m.next_obs[row].copy_(b.next_obs[row].flip({2}));
  }
  m.actions = torch::tensor(std::vector<int64_t>{0, 3, 2, 1, 4, 4});
  std::vector<float> g_with, g_mirror, g_plain;
  const TrainStats stats_with = Accumulate(*with, b);
  REQUIRE(with->TakeMeanGradient(&g_with));
  const TrainStats stats_mirror = Accumulate(*without, m);
  REQUIRE(without->TakeMeanGradient(&g_mirror));
  Accumulate(*without, b);
  REQUIRE(without->TakeMeanGradient(&g_plain));
  REQUIRE(g_with.size() == g_mirror.size());
  double differs = 0;
  for (size_t i = 0; i < g_with.size(); ++i) {
    REQUIRE(g_with[i] == Approx(g_mirror[i]).margin(1e-6));
    differs += std::fabs(g_with[i] - g_plain[i]);
  }
  CHECK(differs > 1e-4);  // The mirrored rows did change the update.
  for (size_t i = 0; i < 6; ++i)
    CHECK(stats_with.td_errors[i] == Approx(stats_mirror.td_errors[i]));
}

TEST_CASE("A random shift moves each image by its own offset within the pad, the edge repeated",
          "[learner]") {
  // Distinct values: image i, channel c, row y, column x holds a value that names them.
  const int64_t n = 64, c = 2, h = 5, w = 7;
  const torch::Tensor images =
      torch::arange(n * c * h * w, torch::kInt64).view({n, c, h, w}).to(torch::kInt32);
  torch::Generator generator = at::detail::createCPUGenerator(11);
  const torch::Tensor shifted = RandomShift(images, 2, generator);
  REQUIRE(shifted.sizes() == images.sizes());
  REQUIRE(shifted.scalar_type() == torch::kInt32);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < n; ++i) {
    // The offset that explains this image's top-left corner, and then every pixel.
    bool explained = false;
    for (int64_t dy = -2; dy <= 2 && !explained; ++dy) {
      for (int64_t dx = -2; dx <= 2 && !explained; ++dx) {
        bool all = true;
        for (int64_t ch = 0; ch < c && all; ++ch) {
          for (int64_t y = 0; y < h && all; ++y) {
            for (int64_t x = 0; x < w && all; ++x) {
              const int64_t sy = std::clamp<int64_t>(y + dy, 0, h - 1);
              const int64_t sx = std::clamp<int64_t>(x + dx, 0, w - 1);
              all = shifted[i][ch][y][x].item<int>() == images[i][ch][sy][sx].item<int>();
            }
          }
        }
        if (all) {
          explained = true;
          offsets.insert({dy, dx});
        }
      }
    }
    INFO("image " << i);
    CHECK(explained);
  }
  CHECK(offsets.size() >= 10);  // Each image draws its own offset, of the 25 there are.
  torch::Generator again = at::detail::createCPUGenerator(11);
  CHECK(torch::equal(RandomShift(images, 2, again), shifted));  // Seeded: reproducible.
  CHECK(torch::equal(RandomShift(images, 0, again), images));   // No pad: no shift.
}

TEST_CASE("With a random shift the learner trains on shifted samples, without it on the samples",
          "[learner]") {
  LearnerOptions plain = TinyOptions();
  LearnerOptions shifted = plain;
  shifted.random_shift = 1;
  auto with = *DqnLearner::Create(shifted);
  auto without = *DqnLearner::Create(plain);  // The same seed: the same initial weights.
  auto again = *DqnLearner::Create(plain);
  const Batch b = RandomBatch(8, 9);
  std::vector<float> g_with, g_without, g_again;
  Accumulate(*with, b);
  REQUIRE(with->TakeMeanGradient(&g_with));
  Accumulate(*without, b);
  REQUIRE(without->TakeMeanGradient(&g_without));
  Accumulate(*again, b);
  REQUIRE(again->TakeMeanGradient(&g_again));
  CHECK(g_without == g_again);
  double differs = 0;
  for (size_t i = 0; i < g_with.size(); ++i) differs += std::fabs(g_with[i] - g_without[i]);
  CHECK(differs > 1e-4);
}

TEST_CASE("The local Adam steps at the learning rate times the schedule's scale", "[learner]") {
  auto full = *DqnLearner::Create(TinyOptions());
  auto half = *DqnLearner::Create(TinyOptions());  // The same seed: the same initial weights.
  std::vector<float> before, after_full, after_half;
  full->GetWeights(&before);
  const Batch b = RandomBatch(8, 5);
  Accumulate(*full, b);
  REQUIRE(full->StepLocal());
  half->SetLearningRateScale(0.5);
  Accumulate(*half, b);
  REQUIRE(half->StepLocal());
  full->GetWeights(&after_full);
  half->GetWeights(&after_half);
  // Adam's first step moves each parameter with a gradient by the rate (m / sqrt(v) = +-1).
  int compared = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    const double step_full = after_full[i] - before[i], step_half = after_half[i] - before[i];
    if (std::fabs(step_full) < 1e-6) continue;
    ++compared;
    CHECK(step_half == Approx(0.5 * step_full).epsilon(1e-3));
  }
  CHECK(compared > 100);
}

TEST_CASE("A mirror table that is not an involution over the actions is refused", "[learner]") {
  LearnerOptions o = TinyOptions();
  o.mirror_actions = {4, 3, 2, 1};
  absl::StatusOr<std::unique_ptr<DqnLearner>> short_table = DqnLearner::Create(o);
  REQUIRE(short_table.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(short_table.status().message() == "mirror_actions names 4 actions, the learner has 5");
  o.mirror_actions = {1, 2, 0, 3, 4};
  absl::StatusOr<std::unique_ptr<DqnLearner>> cycle = DqnLearner::Create(o);
  REQUIRE(cycle.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(cycle.status().message() ==
        "mirror_actions is not an involution over the actions at action 0");
  o.mirror_actions = {4, 3, 2, 1, 5};
  CHECK(DqnLearner::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("QValues gives every action's value and the greedy action", "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  const Batch b = RandomBatch(3, 7);
  std::vector<float> q;
  for (int i = 0; i < 3; ++i) {
    const torch::Tensor obs = b.obs[i].contiguous();
    const int greedy = learner->QValues(obs.data_ptr<uint8_t>(), &q);
    REQUIRE(q.size() == static_cast<size_t>(kDefaultNumActions));
    CHECK(greedy == learner->GreedyAction(obs.data_ptr<uint8_t>()));
    CHECK(q[greedy] == *std::max_element(q.begin(), q.end()));
  }
}

TEST_CASE("A learner loaded from another's state learns on exactly as that one does",
          "[learner][checkpoint]") {
  auto original = *DqnLearner::Create(TinyOptions());
  const Batch b = RandomBatch(16, 3);
  int applied = 0;
  Regress(*original, b, 5, &applied);  // The Adam has moments and a step count now.
  const std::string state = original->SaveState();

  LearnerOptions other_seed = TinyOptions();
  other_seed.seed = 99;
  auto loaded = *DqnLearner::Create(other_seed);
  REQUIRE(loaded->LoadState(state).ok());
  std::vector<float> a, c;
  original->GetWeights(&a);
  loaded->GetWeights(&c);
  CHECK(a == c);
  // The same steps from here give the same weights: the moments came along (an Adam started
  // afresh takes a step of a different size).
  Regress(*original, b, 3, &applied);
  Regress(*loaded, b, 3, &applied);
  original->GetWeights(&a);
  loaded->GetWeights(&c);
  CHECK(a == c);
  // And the target network: Double DQN's next-state values are the same.
  const TrainStats x = Accumulate(*original, RandomBatch(8, 5));
  const TrainStats y = Accumulate(*loaded, RandomBatch(8, 5));
  CHECK(x.td_errors == y.td_errors);

  auto fresh = *DqnLearner::Create(TinyOptions());
  Regress(*fresh, b, 3, &applied);
  std::vector<float> f;
  fresh->GetWeights(&f);
  CHECK(f != a);
}

TEST_CASE("A learner state that is not one, or of another model, is refused", "[learner]") {
  auto learner = *DqnLearner::Create(TinyOptions());
  std::vector<float> before;
  learner->GetWeights(&before);
  const absl::Status junk = learner->LoadState("not an archive");
  CHECK(junk.code() == absl::StatusCode::kDataLoss);

  LearnerOptions more_actions = TinyOptions();
  more_actions.num_actions = kDefaultNumActions + 2;
  auto other = *DqnLearner::Create(more_actions);
  const absl::Status mismatch = learner->LoadState(other->SaveState());
  INFO(mismatch);
  CHECK(mismatch.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(mismatch.message(), "parameters"));
  std::vector<float> after;
  learner->GetWeights(&after);
  CHECK(after == before);
}

}  // namespace
}  // namespace convoy::agent
