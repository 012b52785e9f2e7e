// The agent's time split: the phase clock charges CPU work to the phase it is lapped as and a wait
// its wall time; the shares and the run's table add up to what the process used.
#include "common/support/time_split.h"

#include <cmath>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/catch.h"

namespace convoy {
namespace {

// Burns about `seconds` of this thread's CPU.
void Burn(double seconds) {
  const double until = ThreadCpuSeconds() + seconds;
  volatile double x = 1;
  while (ThreadCpuSeconds() < until) {
    for (int i = 0; i < 1000; ++i) x = std::sqrt(x + i);
  }
}

TEST_CASE("The phase clock charges CPU work to its phase, and a wait its wall time",
          "[time_split]") {
  PhaseClock clock;
  Burn(0.05);
  clock.Lap(AgentPhase::kTrain);
  absl::SleepFor(absl::Milliseconds(80));
  clock.Lap(AgentPhase::kWait);
  Burn(0.02);
  clock.Lap(AgentPhase::kEnvironment);
  absl::SleepFor(absl::Milliseconds(50));
  clock.Lap(AgentPhase::kInference);  // A sleep takes no CPU, whatever it is lapped as.

  const TimeSplit& split = clock.split();
  CHECK(split[AgentPhase::kTrain] >= 0.05);
  CHECK(split[AgentPhase::kTrain] < 0.2);
  CHECK(split[AgentPhase::kEnvironment] >= 0.02);
  CHECK(split[AgentPhase::kEnvironment] < 0.1);
  CHECK(split[AgentPhase::kWait] >= 0.08);
  CHECK(split[AgentPhase::kInference] < 0.02);
  CHECK(split[AgentPhase::kPreprocess] == 0);
  // The acting thread's CPU is every phase but the wait.
  CHECK(split.acting_cpu() == Approx(split[AgentPhase::kTrain] + split[AgentPhase::kEnvironment] +
                                     split[AgentPhase::kInference] + split[AgentPhase::kOther]));
}

TimeSplit Sample() {
  TimeSplit s;
  s[AgentPhase::kEnvironment] = 20;
  s[AgentPhase::kPreprocess] = 2;
  s[AgentPhase::kInference] = 8;
  s[AgentPhase::kReplay] = 4;
  s[AgentPhase::kTrain] = 40;
  s[AgentPhase::kSync] = 2;
  s[AgentPhase::kWait] = 5;
  s[AgentPhase::kOther] = 4;
  s.sampler_cpu = 10;
  s.process_cpu = 100;
  return s;
}

TEST_CASE(
    "The other threads' CPU is what the process used beyond the acting thread and the "
    "sampler",
    "[time_split]") {
  const TimeSplit s = Sample();
  CHECK(s.acting_cpu() == Approx(80));
  CHECK(s.other_threads_cpu() == Approx(10));
  TimeSplit over = s;
  over.process_cpu = 50;  // Read a moment before the parts: never below zero.
  CHECK(over.other_threads_cpu() == 0);

  TimeSplit two = s;
  two += s;
  CHECK(two[AgentPhase::kTrain] == Approx(80));
  CHECK(two.process_cpu == Approx(200));
  const TimeSplit back = two - s;
  CHECK(back[AgentPhase::kTrain] == Approx(40));
  CHECK(back.sampler_cpu == Approx(10));
}

TEST_CASE(
    "The shares name every part as a percentage of the process's CPU and the wait of the "
    "wall",
    "[time_split]") {
  CHECK(FormatTimeShares(Sample(), 200) ==
        "env 20% preprocess 2% inference 8% replay 4% sampler 10% train 40% sync 2% threads 10% "
        "other 4% | wait 2% of wall");
  CHECK(FormatTimeShares(Sample(), 0).find("wait") == std::string::npos);
  CHECK(FormatTimeShares(TimeSplit{}, 10).empty());
}

TEST_CASE(
    "The run's table gives each part's CPU-seconds, share and cost per step, and RESULT lines",
    "[time_split]") {
  const std::string table = FormatTimeSplitTable(Sample(), 200, 50000, 12500);
  INFO(table);
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("| train step"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("|       40.0 |  40.0% |          0.800 |"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("\nRESULT cpu_seconds_train=40.00\n"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("\nRESULT cpu_share_sampler=0.1000\n"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("\nRESULT cpu_share_threads=0.1000\n"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("\nRESULT cpu_seconds=100.00\n"));
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("\nRESULT wait_share=0.0250\n"));
  CHECK_THAT(table,
             Catch::Matchers::ContainsSubstring("\nRESULT env_steps_per_cpu_second=500.00\n"));
  CHECK_THAT(table,
             Catch::Matchers::ContainsSubstring("\nRESULT train_steps_per_cpu_second=125.000\n"));
}

}  // namespace
}  // namespace convoy
