// The agents' PROGRESS line: the record round-trips through its exact line, and a line that lacks
// a field or carries a malformed one is an error naming it.
#include "common/support/progress_record.h"

#include <string>

#include "tests/catch.h"

namespace convoy {
namespace {

ProgressRecord Sample() {
  ProgressRecord r;
  r.agent = "agent-1";
  r.episodes = 12;
  r.env_steps = 3400;
  r.train_steps = 800;
  r.avg_return = 41.25;
  r.env_sps = 95;
  r.train_sps = 22.5;
  r.epsilon = 0.412;
  r.loss = 0.01234;
  r.version = 790;
  r.connected = true;
  r.wall_s = 60;
  r.time[AgentPhase::kEnvironment] = 12.1;
  r.time[AgentPhase::kPreprocess] = 0.9;
  r.time[AgentPhase::kInference] = 4.25;
  r.time[AgentPhase::kReplay] = 1.8;
  r.time[AgentPhase::kTrain] = 26;
  r.time[AgentPhase::kSync] = 1;
  r.time[AgentPhase::kWait] = 0.4;
  r.time[AgentPhase::kOther] = 1.1;
  r.time.sampler_cpu = 3.5;
  r.time.process_cpu = 52;
  return r;
}

// The line of an agent from before the time split: what the launchers have always read.
const char kSampleLine[] =
    "PROGRESS agent=agent-1 episodes=12 env_steps=3400 train_steps=800 avg_return=41.250 "
    "env_sps=95.0 train_sps=22.50 epsilon=0.412 loss=0.01234 version=790 connected=1";
const char kSplitFields[] =
    " wall_s=60.00 cpu_env=12.100 cpu_preprocess=0.900 cpu_inference=4.250 cpu_replay=1.800 "
    "cpu_train=26.000 cpu_sync=1.000 wait_s=0.400 cpu_other=1.100 cpu_sampler=3.500 "
    "cpu_process=52.000";

TEST_CASE(
    "A PROGRESS record is formatted as the line the launchers have always read, then its "
    "time split",
    "[progress]") {
  CHECK(FormatProgress(Sample()) == std::string(kSampleLine) + kSplitFields);
}

TEST_CASE("A PROGRESS line's time split reads back; an older line without it reads as zeros",
          "[progress]") {
  absl::StatusOr<ProgressRecord> parsed = ParseProgress(FormatProgress(Sample()));
  REQUIRE(parsed.ok());
  const ProgressRecord expected = Sample();
  CHECK(parsed->wall_s == Approx(60));
  for (int p = 0; p < kAgentPhases; ++p) {
    INFO(AgentPhaseKey(static_cast<AgentPhase>(p)));
    CHECK(parsed->time.phase[p] == Approx(expected.time.phase[p]));
  }
  CHECK(parsed->time.sampler_cpu == Approx(3.5));
  CHECK(parsed->time.process_cpu == Approx(52));

  absl::StatusOr<ProgressRecord> older = ParseProgress(kSampleLine);
  REQUIRE(older.ok());
  CHECK(older->env_steps == 3400);
  CHECK(older->wall_s == 0);
  CHECK(older->time.process_cpu == 0);
  CHECK(older->time.acting_cpu() == 0);

  std::string bad = FormatProgress(Sample());
  bad.replace(bad.find("cpu_train=26.000"), std::string("cpu_train=26.000").size(),
              "cpu_train=lots");
  absl::StatusOr<ProgressRecord> malformed = ParseProgress(bad);
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(malformed.status().message()),
             Catch::Matchers::ContainsSubstring("cpu_train='lots' is not a number"));
}

TEST_CASE("A PROGRESS line parses back into the record it was formatted from", "[progress]") {
  absl::StatusOr<ProgressRecord> parsed = ParseProgress(FormatProgress(Sample()));
  REQUIRE(parsed.ok());
  const ProgressRecord expected = Sample();
  CHECK(parsed->agent == expected.agent);
  CHECK(parsed->episodes == expected.episodes);
  CHECK(parsed->env_steps == expected.env_steps);
  CHECK(parsed->train_steps == expected.train_steps);
  CHECK(parsed->avg_return == Approx(expected.avg_return));
  CHECK(parsed->env_sps == Approx(expected.env_sps));
  CHECK(parsed->train_sps == Approx(expected.train_sps));
  CHECK(parsed->epsilon == Approx(expected.epsilon));
  CHECK(parsed->loss == Approx(expected.loss));
  CHECK(parsed->version == expected.version);
  CHECK(parsed->connected);
}

TEST_CASE("A disconnected agent's line says connected=0 and reads back so", "[progress]") {
  ProgressRecord r = Sample();
  r.connected = false;
  absl::StatusOr<ProgressRecord> parsed = ParseProgress(FormatProgress(r));
  REQUIRE(parsed.ok());
  CHECK_FALSE(parsed->connected);
}

TEST_CASE("A PROGRESS line's fields may come in any order, and unknown ones are skipped",
          "[progress]") {
  absl::StatusOr<ProgressRecord> parsed = ParseProgress(
      "PROGRESS connected=1 version=790 loss=0.01234 epsilon=0.412 train_sps=22.50 env_sps=95.0 "
      "avg_return=41.250 train_steps=800 env_steps=3400 episodes=12 agent=agent-1 gpu_mb=512");
  REQUIRE(parsed.ok());
  CHECK(parsed->env_steps == 3400);
  CHECK(parsed->agent == "agent-1");
}

TEST_CASE("Only lines that start with PROGRESS are progress lines", "[progress]") {
  CHECK(IsProgressLine(kSampleLine));
  CHECK_FALSE(IsProgressLine("[agent-1] 12 episodes, 3400 steps"));
  absl::StatusOr<ProgressRecord> parsed = ParseProgress("[agent-1] 12 episodes");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("A PROGRESS line without a field is an error naming the field", "[progress]") {
  std::string line = kSampleLine;
  line.erase(line.find(" env_steps=3400"), std::string(" env_steps=3400").size());
  absl::StatusOr<ProgressRecord> parsed = ParseProgress(line);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Matchers::ContainsSubstring("lacks the field env_steps"));
}

TEST_CASE("A PROGRESS line without several fields names them all", "[progress]") {
  absl::StatusOr<ProgressRecord> parsed = ParseProgress("PROGRESS agent=agent-0 episodes=1");
  REQUIRE_FALSE(parsed.ok());
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Matchers::ContainsSubstring(
                 "fields env_steps, train_steps, avg_return, env_sps, train_sps, epsilon, loss, "
                 "version, connected"));
}

// Each malformed value, and the words its error names it by.
TEST_CASE("A PROGRESS field of the wrong type is an error naming the field and its value",
          "[progress]") {
  const struct {
    const char* from;
    const char* to;
    const char* message;
  } cases[] = {
      {"episodes=12", "episodes=twelve", "episodes='twelve' is not a count"},
      {"env_steps=3400", "env_steps=-5", "env_steps='-5' is not a count"},
      {"version=790", "version=7.5", "version='7.5' is not a count"},
      {"avg_return=41.250", "avg_return=high", "avg_return='high' is not a number"},
      {"loss=0.01234", "loss=", "loss='' is not a number"},
      {"connected=1", "connected=yes", "connected='yes' is not 0 or 1"},
      {"agent=agent-1", "agent=", "agent='' is not an agent id"},
      {"epsilon=0.412", "epsilon", "'epsilon' is not key=value"},
  };
  for (const auto& c : cases) {
    std::string line = kSampleLine;
    line.replace(line.find(c.from), std::string(c.from).size(), c.to);
    INFO(line);
    absl::StatusOr<ProgressRecord> parsed = ParseProgress(line);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(parsed.status().message()),
               Catch::Matchers::ContainsSubstring(c.message));
  }
}

}  // namespace
}  // namespace convoy
