#include "agent/learning/replay_memory.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "tests/agent/learning/replay_test_options.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

// Test frames are {1, 2, 4}: 8 bytes holding the frame number twice as little-endian uint32, so a
// decoded slot names the frame it came from and shows whether it is whole.
constexpr std::array<int, 3> kTinyFrame = {1, 2, 4};
constexpr size_t kTinyBytes = 8;

std::vector<uint8_t> EncodeFrame(uint64_t number) {
  std::vector<uint8_t> frame(kTinyBytes);
  for (size_t i = 0; i < kTinyBytes; ++i) frame[i] = static_cast<uint8_t>(number >> (8 * (i % 4)));
  return frame;
}

// The frame numbers of each slot of a stacked observation (-1 for a slot that is not a whole
// frame).
std::vector<int64_t> DecodeStack(const uint8_t* stack, int frame_stack) {
  std::vector<int64_t> numbers;
  for (int s = 0; s < frame_stack; ++s) {
    const uint8_t* frame = stack + s * kTinyBytes;
    uint32_t first = 0, second = 0;
    std::memcpy(&first, frame, 4);
    std::memcpy(&second, frame + 4, 4);
    numbers.push_back(first == second ? int64_t{first} : -1);
  }
  return numbers;
}

ReplayOptions TinyOptions() {
  ReplayOptions options = testing::OneStepUniform();
  options.frame_shape = kTinyFrame;
  options.capacity = 1000;
  return options;
}

std::unique_ptr<ReplayMemory> MustCreate(const ReplayOptions& options) {
  auto memory = ReplayMemory::Create(options);
  REQUIRE(memory.ok());
  return std::move(memory).value();
}

// Drives a ReplayMemory with numbered frames and keeps an independent record of every episode, from
// which it computes what any sampled transition must look like.
class Recorder {
 public:
  explicit Recorder(ReplayMemory* memory) : memory_(memory), options_(memory->options()) {}

  void Start() {
    Write(/*episode_start=*/true);
    memory_->StartEpisode(EncodeFrame(frames_ - 1).data());
  }
  void Step(float reward, bool terminal) {
    const uint64_t obs = frames_ - 1;
    Write(/*episode_start=*/false);
    has_transition_[obs] = true;
    action_[obs] = static_cast<int>(obs % 5);
    reward_[obs] = reward;
    terminal_[obs] = terminal;
    memory_->Add(action_[obs], reward, terminal, EncodeFrame(frames_ - 1).data());
  }

  std::vector<int64_t> ExpectedStack(uint64_t newest) const {
    std::vector<int64_t> numbers;
    for (int s = 0; s < options_.frame_stack; ++s) {
      const uint64_t back = options_.frame_stack - 1 - s;
      numbers.push_back(
          static_cast<int64_t>(std::max(newest - std::min(back, newest), episode_start_[newest])));
    }
    return numbers;
  }

  // Checks every transition of `batch` against the record; returns the obs frame numbers sampled.
  std::vector<uint64_t> Check(const ReplayBatch& batch) {
    const int fs = options_.frame_stack;
    const size_t obs_bytes = memory_->observation_bytes();
    std::vector<uint64_t> sampled;
    for (size_t i = 0; i < batch.size; ++i) {
      const std::vector<int64_t> obs = DecodeStack(batch.observations.data() + i * obs_bytes, fs);
      REQUIRE(obs.back() >= 0);
      const uint64_t g = static_cast<uint64_t>(obs.back());
      REQUIRE(g < frames_);
      REQUIRE(has_transition_[g]);
      CHECK(obs == ExpectedStack(g));
      // An id always names the same transition.
      auto [it, inserted] = id_to_frame_.emplace(batch.ids[i], g);
      CHECK(it->second == g);

      double ret = 0.0, discount = 1.0;
      bool terminal = false;
      uint64_t m = 0;
      for (uint64_t j = 0; j < static_cast<uint64_t>(options_.n_step); ++j) {
        if (!HasTransition(g + j) || (j > 0 && episode_start_[g + j] != episode_start_[g])) break;
        ret += discount * reward_[g + j];
        discount *= options_.gamma;
        m = j + 1;
        if (terminal_[g + j]) {
          terminal = true;
          break;
        }
      }
      // A shortened window is only sampled once the episode is over.
      if (m < static_cast<uint64_t>(options_.n_step) && !terminal) {
        CHECK(g + m + 1 < frames_);
        CHECK(episode_start_[g + m + 1] == g + m + 1);
      }
      CHECK(batch.actions[i] == action_[g]);
      CHECK(batch.returns[i] == Approx(ret));
      CHECK(batch.discounts[i] == Approx(terminal ? 0.0 : discount));
      const std::vector<int64_t> next =
          DecodeStack(batch.next_observations.data() + i * obs_bytes, fs);
      CHECK(next == ExpectedStack(g + m));
      sampled.push_back(g);
    }
    return sampled;
  }

  uint64_t frames() const { return frames_; }

 private:
  // Frames past the newest have no transition.
  bool HasTransition(uint64_t g) const { return g < has_transition_.size() && has_transition_[g]; }

  void Write(bool episode_start) {
    const uint64_t g = frames_++;
    episode_start_.push_back(episode_start ? g : episode_start_.back());
    has_transition_.push_back(false);
    action_.push_back(0);
    reward_.push_back(0.0f);
    terminal_.push_back(false);
  }

  ReplayMemory* memory_;
  const ReplayOptions options_;
  uint64_t frames_ = 0;
  std::vector<uint64_t> episode_start_;
  std::vector<bool> has_transition_;
  std::vector<int> action_;
  std::vector<float> reward_;
  std::vector<bool> terminal_;
  std::map<uint64_t, uint64_t> id_to_frame_;
};

// Samples many batches of size() (so every sampleable transition shows up) and gathers them into
// `all`; returns the index in `all` of one sample of each transition, keyed by its observation's
// newest frame.
std::map<uint64_t, size_t> SampleAll(ReplayMemory* memory, ReplayBatch* all) {
  const size_t obs_bytes = memory->observation_bytes();
  const size_t n = memory->size();
  REQUIRE(n > 0);
  *all = ReplayBatch();
  ReplayBatch batch;
  for (int round = 0; round < 64; ++round) {
    REQUIRE(memory->Sample(n, &batch).ok());
    all->size += batch.size;
    all->observations.insert(all->observations.end(), batch.observations.begin(),
                             batch.observations.end());
    all->next_observations.insert(all->next_observations.end(), batch.next_observations.begin(),
                                  batch.next_observations.end());
    all->actions.insert(all->actions.end(), batch.actions.begin(), batch.actions.end());
    all->returns.insert(all->returns.end(), batch.returns.begin(), batch.returns.end());
    all->discounts.insert(all->discounts.end(), batch.discounts.begin(), batch.discounts.end());
    all->weights.insert(all->weights.end(), batch.weights.begin(), batch.weights.end());
    all->ids.insert(all->ids.end(), batch.ids.begin(), batch.ids.end());
  }
  std::map<uint64_t, size_t> where;
  for (size_t i = 0; i < all->size; ++i) {
    const auto obs =
        DecodeStack(all->observations.data() + i * obs_bytes, memory->options().frame_stack);
    where[static_cast<uint64_t>(obs.back())] = i;
  }
  return where;
}

TEST_CASE("Create rejects invalid options", "[replay]") {
  auto rejects = [](ReplayOptions options) {
    auto memory = ReplayMemory::Create(options);
    return !memory.ok() && absl::IsInvalidArgument(memory.status());
  };
  ReplayOptions good = TinyOptions();
  CHECK(ReplayMemory::Create(good).ok());
  ReplayOptions bad = good;
  bad.frame_shape = {0, 84, 84};
  CHECK(rejects(bad));
  bad = good;
  bad.frame_stack = 0;
  CHECK(rejects(bad));
  bad = good;
  bad.n_step = 0;
  CHECK(rejects(bad));
  bad = good;
  bad.capacity = 0;
  CHECK(rejects(bad));
  bad = good;
  bad.gamma = 1.5;
  CHECK(rejects(bad));
  bad = good;
  bad.prioritized = true;
  bad.priority_epsilon = 0.0;
  CHECK(rejects(bad));
  bad = good;
  bad.prioritized = true;
  bad.beta_start = -0.1;
  CHECK(rejects(bad));
}

TEST_CASE("Each Add stores one frame however deep the stack", "[replay]") {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 10000;
  options.frame_shape = {1, 84, 84};
  options.frame_stack = 4;
  auto memory = MustCreate(options);
  const size_t frame = 84 * 84;
  std::vector<uint8_t> pixels(frame, 7);
  memory->StartEpisode(pixels.data());
  const size_t before = memory->memory_bytes();
  constexpr size_t kAdds = 2000;
  for (size_t i = 0; i < kAdds; ++i) memory->Add(0, 0.0f, false, pixels.data());
  const size_t growth = memory->memory_bytes() - before;
  // Frames are allocated in chunks, so allow a little either way; a copy per stack would be 4x.
  CHECK(growth >= kAdds * frame * 9 / 10);
  CHECK(growth <= kAdds * frame * 11 / 10);
}

TEST_CASE("bytes_per_transition is one frame plus small metadata", "[replay]") {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 1000000;
  options.frame_shape = {1, 84, 84};
  options.frame_stack = 4;
  options.n_step = 3;
  auto uniform = MustCreate(options);
  CHECK(uniform->bytes_per_transition() >= 84 * 84);
  CHECK(uniform->bytes_per_transition() <= 84 * 84 + 32);
  options.prioritized = true;
  auto prioritized = MustCreate(options);
  CHECK(prioritized->bytes_per_transition() <= 84 * 84 + 64);
  // One million 84x84 transitions in about 7 GB.
  CHECK(prioritized->bytes_per_transition() * options.capacity < 7200000000.0);
  options.frame_shape = {3, 59, 255};
  auto color = MustCreate(options);
  CHECK(color->bytes_per_transition() >= 3 * 59 * 255);
  CHECK(color->bytes_per_transition() <= 3 * 59 * 255 + 64);
}

TEST_CASE("A full memory allocates about bytes_per_transition for each transition", "[replay]") {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 3000;
  options.frame_shape = {1, 84, 84};
  options.frame_stack = 4;
  options.prioritized = true;
  auto memory = MustCreate(options);
  std::vector<uint8_t> pixels(84 * 84, 1);
  memory->StartEpisode(pixels.data());
  for (int i = 0; i < 4000; ++i) memory->Add(0, 0.0f, false, pixels.data());
  CHECK(memory->size() == options.capacity);
  CHECK(memory->memory_bytes() <= memory->bytes_per_transition() * options.capacity);
  CHECK(memory->memory_bytes() >= options.capacity * 84 * 84);
}

TEST_CASE("Stacked observations equal a hand built stack across episode starts", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.frame_stack = 3;
  auto memory = MustCreate(options);
  Recorder recorder(memory.get());
  // Episode of frames 0..3 cut by a time limit, then one of frames 4..6 ending in a terminal.
  recorder.Start();
  for (int i = 0; i < 3; ++i) recorder.Step(1.0f, false);
  recorder.Start();
  recorder.Step(1.0f, false);
  recorder.Step(1.0f, true);

  ReplayBatch batch;
  const std::map<uint64_t, size_t> where = SampleAll(memory.get(), &batch);
  const std::map<uint64_t, std::pair<std::vector<int64_t>, std::vector<int64_t>>> expected = {
      {0, {{0, 0, 0}, {0, 0, 1}}}, {1, {{0, 0, 1}, {0, 1, 2}}}, {2, {{0, 1, 2}, {1, 2, 3}}},
      {4, {{4, 4, 4}, {4, 4, 5}}}, {5, {{4, 4, 5}, {4, 5, 6}}},
  };
  REQUIRE(where.size() == expected.size());
  for (const auto& [frame, stacks] : expected) {
    INFO("transition from frame " << frame);
    REQUIRE(where.count(frame) == 1);
    const size_t i = where.at(frame);
    CHECK(DecodeStack(batch.observations.data() + i * memory->observation_bytes(), 3) ==
          stacks.first);
    CHECK(DecodeStack(batch.next_observations.data() + i * memory->observation_bytes(), 3) ==
          stacks.second);
  }
  recorder.Check(batch);
}

TEST_CASE("Stacking keeps each frame's channels together oldest first", "[replay]") {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 100;
  options.frame_shape = {2, 1, 3};
  options.frame_stack = 2;
  auto memory = MustCreate(options);
  const std::vector<uint8_t> a = {1, 2, 3, 4, 5, 6}, b = {11, 12, 13, 14, 15, 16};
  memory->StartEpisode(a.data());
  memory->Add(0, 0.0f, false, b.data());
  ReplayBatch batch;
  REQUIRE(memory->Sample(1, &batch).ok());
  CHECK(batch.observations == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  CHECK(batch.next_observations == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16});
}

TEST_CASE("CurrentObservation repeats the first frame after StartEpisode", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.frame_stack = 4;
  auto memory = MustCreate(options);
  std::vector<uint8_t> out(memory->observation_bytes());
  memory->StartEpisode(EncodeFrame(10).data());
  memory->CurrentObservation(out.data());
  CHECK(DecodeStack(out.data(), 4) == std::vector<int64_t>{10, 10, 10, 10});
  memory->Add(0, 0.0f, false, EncodeFrame(11).data());
  memory->Add(0, 0.0f, false, EncodeFrame(12).data());
  memory->CurrentObservation(out.data());
  CHECK(DecodeStack(out.data(), 4) == std::vector<int64_t>{10, 10, 11, 12});
  memory->StartEpisode(EncodeFrame(20).data());
  memory->CurrentObservation(out.data());
  CHECK(DecodeStack(out.data(), 4) == std::vector<int64_t>{20, 20, 20, 20});
}

TEST_CASE("n-step returns and discounts match hand computed episodes", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.n_step = 3;
  options.gamma = 0.5;
  auto memory = MustCreate(options);
  Recorder recorder(memory.get());
  ReplayBatch batch;
  struct Expected {
    double ret, discount;
    int64_t bootstrap;
  };
  auto check = [&](const std::map<uint64_t, Expected>& expected) {
    const auto where = SampleAll(memory.get(), &batch);
    REQUIRE(where.size() == expected.size());
    for (const auto& [frame, e] : expected) {
      INFO("transition from frame " << frame);
      REQUIRE(where.count(frame) == 1);
      const size_t i = where.at(frame);
      CHECK(batch.returns[i] == Approx(e.ret));
      CHECK(batch.discounts[i] == Approx(e.discount));
      CHECK(
          DecodeStack(batch.next_observations.data() + i * memory->observation_bytes(), 1).back() ==
          e.bootstrap);
    }
    recorder.Check(batch);
  };

  // Frames 0..5, rewards 1, 2, 4, 8, 16 on the transitions from frames 0..4.
  recorder.Start();
  for (float r : {1.0f, 2.0f, 4.0f, 8.0f, 16.0f}) recorder.Step(r, false);
  SECTION("mid-episode windows are full n-step and the newest wait") {
    CHECK(memory->size() == 3);
    check({{0, {1 + 0.5 * 2 + 0.25 * 4, 0.125, 3}},
           {1, {2 + 0.5 * 4 + 0.25 * 8, 0.125, 4}},
           {2, {4 + 0.5 * 8 + 0.25 * 16, 0.125, 5}}});
  }
  SECTION("a terminal within the window gives discount zero") {
    recorder.Step(32.0f, true);  // frame 5 -> terminal frame 6
    CHECK(memory->size() == 6);
    check({{0, {3, 0.125, 3}},
           {1, {6, 0.125, 4}},
           {2, {12, 0.125, 5}},
           {3, {8 + 0.5 * 16 + 0.25 * 32, 0.0, 6}},
           {4, {16 + 0.5 * 32, 0.0, 6}},
           {5, {32, 0.0, 6}}});
  }
  SECTION("a time limit cut bootstraps from the last frame of the episode") {
    recorder.Start();  // frame 6: the episode of frames 0..5 was cut
    CHECK(memory->size() == 5);
    check({{0, {3, 0.125, 3}},
           {1, {6, 0.125, 4}},
           {2, {12, 0.125, 5}},
           {3, {8 + 0.5 * 16, 0.25, 5}},
           {4, {16, 0.5, 5}}});
    // The new episode's transitions do not borrow rewards from the old one.
    recorder.Step(100.0f, false);
    recorder.Step(200.0f, false);
    recorder.Start();
    CHECK(memory->size() == 7);
    check({{0, {3, 0.125, 3}},
           {1, {6, 0.125, 4}},
           {2, {12, 0.125, 5}},
           {3, {16, 0.25, 5}},
           {4, {16, 0.5, 5}},
           {6, {100 + 0.5 * 200, 0.25, 8}},
           {7, {200, 0.5, 8}}});
  }
}

TEST_CASE("Transitions of a running episode wait until their n-step window is complete",
          "[replay]") {
  ReplayOptions options = TinyOptions();
  options.n_step = 3;
  auto memory = MustCreate(options);
  ReplayBatch batch;
  memory->StartEpisode(EncodeFrame(0).data());
  CHECK(memory->size() == 0);
  memory->Add(0, 1.0f, false, EncodeFrame(1).data());
  memory->Add(0, 1.0f, false, EncodeFrame(2).data());
  CHECK(memory->size() == 0);
  const absl::Status status = memory->Sample(1, &batch);
  CHECK(absl::IsFailedPrecondition(status));
  memory->Add(0, 1.0f, false, EncodeFrame(3).data());
  CHECK(memory->size() == 1);
  memory->Add(0, 1.0f, true, EncodeFrame(4).data());
  CHECK(memory->size() == 4);
}

TEST_CASE("Sample fails when fewer transitions than requested", "[replay]") {
  auto memory = MustCreate(TinyOptions());
  ReplayBatch batch;
  CHECK(absl::IsFailedPrecondition(memory->Sample(1, &batch)));
  memory->StartEpisode(EncodeFrame(0).data());
  memory->Add(0, 0.0f, false, EncodeFrame(1).data());
  memory->Add(0, 0.0f, false, EncodeFrame(2).data());
  CHECK(absl::IsFailedPrecondition(memory->Sample(3, &batch)));
  CHECK(memory->Sample(2, &batch).ok());
  CHECK(batch.size == 2);
}

TEST_CASE("Uniform sampling gives weights of one", "[replay]") {
  auto memory = MustCreate(TinyOptions());
  memory->StartEpisode(EncodeFrame(0).data());
  for (int i = 1; i <= 10; ++i) memory->Add(0, 0.0f, false, EncodeFrame(i).data());
  ReplayBatch batch;
  REQUIRE(memory->Sample(10, &batch).ok());
  for (float w : batch.weights) CHECK(w == 1.0f);
}

// Writes random episodes through a small ring and checks every sampled transition against the
// record.
void CheckWrapAround(bool prioritized) {
  ReplayOptions options = TinyOptions();
  options.capacity = 50;
  options.frame_stack = 4;
  options.n_step = 3;
  options.gamma = 0.9;
  options.prioritized = prioritized;
  options.seed = 7;
  auto memory = MustCreate(options);
  Recorder recorder(memory.get());
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> length(1, 12);
  ReplayBatch batch;
  size_t checked = 0;
  std::vector<uint64_t> ids;
  std::vector<float> td;
  for (int episode = 0; episode < 600; ++episode) {
    recorder.Start();
    const int steps = length(rng);
    const bool terminal = rng() % 3 == 0;
    for (int s = 0; s < steps; ++s) {
      recorder.Step(static_cast<float>(rng() % 100) / 10.0f, terminal && s == steps - 1);
      REQUIRE(memory->size() <= options.capacity);
      if (memory->size() >= 16 && rng() % 4 == 0) {
        REQUIRE(memory->Sample(16, &batch).ok());
        const std::vector<uint64_t> frames = recorder.Check(batch);
        checked += frames.size();
        // Only recent transitions survive: the ring holds capacity + frame_stack + n_step frames.
        for (uint64_t g : frames) {
          CHECK(g + options.capacity + options.frame_stack + options.n_step >= recorder.frames());
        }
        if (prioritized) {
          td.assign(batch.size, 0.0f);
          for (size_t i = 0; i < batch.size; ++i) td[i] = static_cast<float>(rng() % 50) / 10.0f;
          memory->UpdatePriorities(batch.ids.data(), td.data(), batch.size);
        }
      }
    }
  }
  CHECK(recorder.frames() > 10 * (options.capacity + 10));  // the ring wrapped many times
  CHECK(checked > 10000);
}

TEST_CASE("Ring wrap around keeps every sampleable transition consistent", "[replay]") {
  SECTION("uniform") { CheckWrapAround(false); }
  SECTION("prioritized") { CheckWrapAround(true); }
}

TEST_CASE("Long episodes fill the memory to capacity", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.capacity = 40;
  options.frame_stack = 4;
  options.n_step = 3;
  auto memory = MustCreate(options);
  Recorder recorder(memory.get());
  recorder.Start();
  for (int i = 0; i < 200; ++i) recorder.Step(1.0f, false);
  CHECK(memory->size() == options.capacity);
  ReplayBatch batch;
  SampleAll(memory.get(), &batch);
  const std::vector<uint64_t> frames = recorder.Check(batch);
  // The newest capacity transitions whose windows are complete: from frames 158..197.
  CHECK(*std::min_element(frames.begin(), frames.end()) >= 158);
  CHECK(*std::max_element(frames.begin(), frames.end()) <= 197);
}

// A prioritized memory holding one terminated episode of `count` transitions, ids 0..count-1.
std::unique_ptr<ReplayMemory> PrioritizedEpisode(int count, double beta, uint64_t seed = 1) {
  ReplayOptions options = TinyOptions();
  options.capacity = 100;
  options.prioritized = true;
  options.alpha = 1.0;
  options.priority_epsilon = 1e-9;
  options.beta_start = beta;
  options.beta_end = beta;
  options.seed = seed;
  auto memory = MustCreate(options);
  memory->StartEpisode(EncodeFrame(0).data());
  for (int i = 1; i <= count; ++i) memory->Add(0, 0.0f, i == count, EncodeFrame(i).data());
  return memory;
}

void SetPriorities(ReplayMemory* memory, const std::vector<float>& priorities) {
  std::vector<uint64_t> ids(priorities.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  memory->UpdatePriorities(ids.data(), priorities.data(), ids.size());
}

TEST_CASE("Prioritized sampling draws transitions in proportion to priority", "[replay]") {
  auto memory = PrioritizedEpisode(4, 0.4);
  SetPriorities(memory.get(), {1, 2, 3, 4});
  ReplayBatch batch;
  std::vector<int> counts(4, 0);
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    REQUIRE(memory->Sample(1, &batch).ok());
    ++counts.at(batch.ids[0]);
  }
  for (int i = 0; i < 4; ++i) {
    INFO("transition " << i);
    CHECK(static_cast<double>(counts[i]) / kDraws == Approx((i + 1) / 10.0).margin(0.02));
  }
}

TEST_CASE("Stratified sampling draws one transition from each equal segment of the total priority",
          "[replay]") {
  // Priorities 1, 2, 3, 4 own [0, 1), [1, 3), [3, 6), [6, 10) and six more of 1e-9 share what is
  // left: ten segments of width 1 fall 1, 2, 3, 4 and 0 times.
  auto memory = PrioritizedEpisode(10, 0.4);
  SetPriorities(memory.get(), {1, 2, 3, 4, 0, 0, 0, 0, 0, 0});
  ReplayBatch batch;
  for (int round = 0; round < 20; ++round) {
    REQUIRE(memory->Sample(10, &batch).ok());
    std::vector<int> counts(10, 0);
    for (uint64_t id : batch.ids) ++counts.at(id);
    CHECK(counts == std::vector<int>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0});
  }
}

TEST_CASE("Importance sampling weights follow (N P(i))^-beta normalised to the batch maximum",
          "[replay]") {
  auto memory = PrioritizedEpisode(10, 0.5);
  SetPriorities(memory.get(), {1, 2, 3, 4, 0, 0, 0, 0, 0, 0});
  ReplayBatch batch;
  REQUIRE(memory->Sample(10, &batch).ok());
  // Every batch holds transition 0 (see above), the least likely and so the largest weight.
  const double total = 10 + 6e-9;
  const double max_weight = std::pow(10 * (1 / total), -0.5);
  for (size_t i = 0; i < batch.size; ++i) {
    const double p = (batch.ids[i] + 1) / total;
    CHECK(batch.weights[i] == Approx(std::pow(10 * p, -0.5) / max_weight));
  }
}

TEST_CASE("Beta anneals linearly over the sampled transitions", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.prioritized = true;
  options.alpha = 1.0;
  options.beta_start = 0.4;
  options.beta_end = 1.0;
  options.beta_anneal_samples = 100;
  options.priority_epsilon = 1e-12;
  auto memory = MustCreate(options);
  memory->StartEpisode(EncodeFrame(0).data());
  for (int i = 1; i <= 4; ++i) memory->Add(0, 0.0f, i == 4, EncodeFrame(i).data());
  std::vector<uint64_t> ids = {0, 1, 2, 3};
  std::vector<float> td = {1.0f, 1.0f, 1.0f, 3.0f};
  memory->UpdatePriorities(ids.data(), td.data(), ids.size());
  CHECK(memory->beta() == Approx(0.4));
  ReplayBatch batch;
  for (int i = 0; i < 5; ++i) REQUIRE(memory->Sample(2, &batch).ok());
  CHECK(memory->beta() == Approx(0.46));
  // Of two segments [0, 3) and [3, 6) the first draws a transition of priority 1 and the second the
  // one of priority 3, whose weight relative to the first is 3^-beta with the beta from before the
  // batch.
  REQUIRE(memory->Sample(2, &batch).ok());
  CHECK(batch.ids[0] < 3);
  CHECK(batch.ids[1] == 3);
  CHECK(batch.weights[0] == Approx(1.0));
  CHECK(batch.weights[1] == Approx(std::pow(3.0, -0.46)));
  for (int i = 0; i < 30; ++i) REQUIRE(memory->Sample(4, &batch).ok());
  CHECK(memory->beta() == Approx(1.0));
}

TEST_CASE("UpdatePriorities changes sampling and ignores overwritten ids", "[replay]") {
  ReplayOptions options = TinyOptions();
  options.capacity = 4;
  options.prioritized = true;
  options.alpha = 1.0;
  auto memory = MustCreate(options);
  memory->StartEpisode(EncodeFrame(0).data());
  for (int i = 1; i <= 8; ++i) memory->Add(0, 0.0f, false, EncodeFrame(i).data());
  REQUIRE(memory->size() == 4);  // ids 4..7

  auto share_of = [&](uint64_t id) {
    ReplayBatch batch;
    int hits = 0;
    for (int i = 0; i < 2000; ++i) {
      REQUIRE(memory->Sample(1, &batch).ok());
      hits += batch.ids[0] == id;
    }
    return hits / 2000.0;
  };
  uint64_t id = 0;  // dropped long ago
  float td = 1000.0f;
  memory->UpdatePriorities(&id, &td, 1);
  CHECK(share_of(4) == Approx(0.25).margin(0.05));

  id = 4;
  memory->UpdatePriorities(&id, &td, 1);
  CHECK(share_of(4) > 0.99);

  // A new transition enters with the largest priority seen so far.
  memory->Add(0, 0.0f, false, EncodeFrame(9).data());  // id 8 replaces id 4
  CHECK(share_of(8) > 0.99);
  id = 8;
  td = 0.0f;
  memory->UpdatePriorities(&id, &td, 1);
  CHECK(share_of(8) < 0.01);
}

TEST_CASE("The same seed gives the same batches", "[replay]") {
  for (bool prioritized : {false, true}) {
    auto run = [prioritized](uint64_t seed) {
      ReplayOptions options = TinyOptions();
      options.prioritized = prioritized;
      options.seed = seed;
      options.n_step = 2;
      auto memory = MustCreate(options);
      std::vector<uint64_t> all;
      ReplayBatch batch;
      memory->StartEpisode(EncodeFrame(0).data());
      for (int i = 1; i <= 300; ++i) {
        memory->Add(i % 3, 0.5f, false, EncodeFrame(i).data());
        if (i % 50 == 0) {
          REQUIRE(memory->Sample(8, &batch).ok());
          all.insert(all.end(), batch.ids.begin(), batch.ids.end());
          std::vector<float> td(batch.size, 1.0f + i / 100.0f);
          memory->UpdatePriorities(batch.ids.data(), td.data(), batch.size);
        }
      }
      return all;
    };
    INFO("prioritized " << prioritized);
    CHECK(run(5) == run(5));
    CHECK(run(5) != run(6));
  }
}

TEST_CASE("Concurrent Add and Sample never see torn frames", "[replay]") {
  // Each frame is one value (its number mod 256); every stacked slot must be a whole frame and the
  // slots must be consecutive frames of one episode.
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 500;
  options.frame_shape = {1, 84, 84};
  options.frame_stack = 4;
  options.n_step = 3;
  options.prioritized = true;
  auto memory = MustCreate(options);
  const size_t frame = 84 * 84;
  std::atomic<bool> done{false};

  std::thread writer([&] {
    std::vector<uint8_t> pixels(frame);
    std::mt19937_64 rng(11);
    uint64_t number = 0;
    for (int episode = 0; episode < 1500; ++episode) {
      std::fill(pixels.begin(), pixels.end(), static_cast<uint8_t>(number++));
      memory->StartEpisode(pixels.data());
      const int steps = 1 + static_cast<int>(rng() % 30);
      for (int s = 0; s < steps; ++s) {
        std::fill(pixels.begin(), pixels.end(), static_cast<uint8_t>(number++));
        memory->Add(0, 1.0f, s == steps - 1 && rng() % 2 == 0, pixels.data());
      }
    }
    done = true;
  });

  ReplayBatch batch;
  int batches = 0;
  int failures = 0;
  auto whole = [&](const uint8_t* slot) {
    return std::all_of(slot, slot + frame, [&](uint8_t v) { return v == slot[0]; });
  };
  while (!done || batches < 50) {
    if (!memory->Sample(32, &batch).ok()) continue;
    ++batches;
    for (size_t i = 0; i < batch.size; ++i) {
      for (const std::vector<uint8_t>* stacks : {&batch.observations, &batch.next_observations}) {
        const uint8_t* stack = stacks->data() + i * 4 * frame;
        std::vector<uint8_t> values;
        for (int s = 0; s < 4; ++s) {
          if (!whole(stack + s * frame)) ++failures;
          values.push_back(stack[s * frame]);
        }
        // Repeats of the episode's first frame, then consecutive frames.
        for (int s = 0; s + 1 < 4; ++s) {
          const uint8_t step = static_cast<uint8_t>(values[s + 1] - values[s]);
          if (step > 1 || (step == 0 && s > 0 && values[s] != values[s - 1])) ++failures;
        }
      }
      const uint8_t obs = batch.observations[i * 4 * frame + 3 * frame];
      const uint8_t next = batch.next_observations[i * 4 * frame + 3 * frame];
      const uint8_t ahead = static_cast<uint8_t>(next - obs);
      if (ahead < 1 || ahead > 3) ++failures;
    }
    std::vector<float> td(batch.size, 0.5f);
    memory->UpdatePriorities(batch.ids.data(), td.data(), batch.size);
  }
  writer.join();
  CHECK(failures == 0);
  CHECK(batches >= 50);
}

}  // namespace
}  // namespace convoy::agent
