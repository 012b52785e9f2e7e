// The product's point: a short training run on this machine learns to drive better than chance.
// Runs convoy_train as a user would (convoy_ps + 2 convoy_agent processes on the embedded
// simulator) and reads its RESULT lines.
#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::agent {
namespace {

using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;

// convoy_train with `extra` flags learns past the bar, hands over a validated policy, and
// convoy_eval reproduces its table.
void ShortRunBeatsRandom(const std::vector<std::string>& extra) {
  const std::string dir = MakeTempDir("learning");
  const std::string log = dir + "/convoy_train.log";
  // Bounded by work (environment steps per agent), so a slower machine takes longer rather than
  // learning less; the minutes are only a safety net.
  // A final validation of 5 more episodes per candidate (20 by default) and an evaluation on 20
  // seeds (the quick check; 100 by default) keep the test's time. The scenario is the default,
  // traffic.
  std::vector<std::string> argv = {CONVOY_TRAIN_BINARY,
                                   "--agents=2",
                                   "--steps_per_agent=11000",
                                   "--minutes=15",
                                   "--runs_dir=" + dir,
                                   "--name=run",
                                   "--report_seconds=30",
                                   "--final_validation_episodes=5",
                                   "--eval_episodes=20"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<Subprocess> train = Subprocess::Start(argv, log);
  REQUIRE(train.ok());
  const std::optional<int> code = train->Wait(absl::Minutes(20));
  const std::string output = ReadWholeFile(log);
  INFO(output);
  REQUIRE(code == 0);
  std::map<std::string, double> results;
  const std::regex line("RESULT ([a-z_]+)=([-0-9.]+)");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    results[(*it)[1]] = std::stod((*it)[2]);
  }
  REQUIRE(results.count("mean_return") == 1);
  REQUIRE(results.count("random_mean_return") == 1);
  // Measured on this 2-core machine with convoy_train's defaults (two frames, a target every 1,200
  // minibatches, which start slower and end higher at 10 minutes): greedy 255 against random 7.9
  // on 20 seeds after 11,000 steps per agent (about 2 minutes); after 7,000, 163 in one run and
  // 56.6 in another, too close to the bar. The bar is a fifth of that gain, to stay clear of
  // run-to-run noise.
  CHECK(results["mean_return"] >= results["random_mean_return"] + 50);
  CHECK(results["mean_distance_m"] >= 2 * results["random_mean_distance_m"]);
  CHECK(results["episodes"] == 20);
  // The scripted expert drove the same seeds, and every table names its scenario.
  REQUIRE(results.count("expert_driving_score") == 1);
  CHECK(results["expert_driving_score"] > results["random_driving_score"]);
  CHECK_THAT(output, Catch::Matchers::ContainsSubstring("scenario: traffic ("));
  // The best and the worst evaluation episode are videos in the run, and in TensorBoard.
  int gifs = 0, event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/run/videos")) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".gif") {
      CHECK(ReadWholeFile(entry.path().string()).substr(0, 6) == "GIF89a");
      ++gifs;
    }
    if (name.rfind("events.out.tfevents.", 0) == 0) ++event_files;
  }
  CHECK(gifs == 2);
  CHECK(event_files == 1);
  CHECK_THAT(output,
             Catch::Matchers::ContainsSubstring("video of the best evaluation episode (seed "));

  // The run validated its weights along the way and handed over the best of them (possibly the
  // last).
  REQUIRE(results.count("policy_version") == 1);
  REQUIRE(results.count("last_version") == 1);
  CHECK(results["policy_version"] <= results["last_version"]);
  CHECK_THAT(output, Catch::Matchers::ContainsSubstring("convoy_train: validation of v"));
  // The server's averaged network took part in the choice and was evaluated too; pulled once the
  // agents had stopped, it was folded up to their last push (on every shard).
  CHECK_THAT(output,
             Catch::Matchers::ContainsSubstring("convoy_train: validation of the average as of v"));
  REQUIRE(results.count("average_version") == 1);
  REQUIRE(results.count("average_full_episodes") == 1);
  CHECK(results["average_version"] == results["last_version"]);
  if (results["policy_averaged"] == 1) {
    CHECK(results["average_mean_return"] == Approx(results["mean_return"]).margin(1e-3));
  }
  // convoy_eval on the handed-over weights drives them over the same seeds: the same table.
  const std::string eval_log = dir + "/convoy_eval.log";
  absl::StatusOr<Subprocess> eval =
      Subprocess::Start({CONVOY_EVAL_BINARY, "--checkpoint=" + dir + "/run/best/weights.pt",
                         "--episodes=20", "--map_png=" + dir + "/map.png"},
                        eval_log);
  REQUIRE(eval.ok());
  REQUIRE(eval->Wait(absl::Minutes(5)) == 0);
  const std::string eval_output = ReadWholeFile(eval_log);
  std::smatch match;
  REQUIRE(std::regex_search(eval_output, match, std::regex("RESULT mean_return=([-0-9.]+)")));
  CHECK(std::stod(match[1]) == Approx(results["mean_return"]).margin(1e-3));
  CHECK(ReadWholeFile(dir + "/map.png").substr(1, 3) == "PNG");
}

TEST_CASE("A short training run beats a random policy on the same seeds", "[learning]") {
  ShortRunBeatsRandom({});
}

// Learning is the same whether one convoy_ps holds the weights or two shards each hold half
// (measured here: 217 against random's 19, 14 of 20 episodes full).
TEST_CASE("A short training run on two parameter-server shards beats a random policy too",
          "[learning][shards]") {
  ShortRunBeatsRandom({"--ps_shards=2"});
}

TEST_CASE("Interrupting convoy_train stops every process with a final checkpoint", "[learning]") {
  const std::string dir = MakeTempDir("interrupt");
  absl::StatusOr<Subprocess> train =
      Subprocess::Start({CONVOY_TRAIN_BINARY, "--agents=2", "--minutes=10", "--runs_dir=" + dir,
                         "--name=run", "--report_seconds=1"},
                        dir + "/convoy_train.log");
  REQUIRE(train.ok());
  // Wait until the agents report progress, then interrupt as Ctrl-C would.
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while (ReadWholeFile(dir + "/convoy_train.log").find("env steps") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  train->Signal(SIGINT);
  const std::optional<int> code = train->Wait(absl::Minutes(2));
  INFO(ReadWholeFile(dir + "/convoy_train.log"));
  CHECK(code == 130);
  CHECK_THAT(ReadWholeFile(dir + "/run/convoy_ps.log"),
             Catch::Matchers::ContainsSubstring("final checkpoint"));
  for (int i = 0; i < 2; ++i) {
    CHECK_THAT(ReadWholeFile(absl::StrCat(dir, "/run/agent-", i, "/agent.log")),
               !Catch::Matchers::ContainsSubstring("failed"));
  }
}

TEST_CASE("convoy_train --resume brings its agents back with their replay memories",
          "[learning][resume]") {
  const std::string dir = MakeTempDir("resume_replay");
  const std::vector<std::string> run = {CONVOY_TRAIN_BINARY,          "--agents=2",
                                        "--runs_dir=" + dir,          "--name=run",
                                        "--report_seconds=1",         "--replay_checkpoints",
                                        "--validate_every_seconds=0", "--eval_episodes=1"};
  std::vector<std::string> first = run;
  first.push_back("--minutes=10");
  absl::StatusOr<Subprocess> train = Subprocess::Start(first, dir + "/first.log");
  REQUIRE(train.ok());
  // Until both agents train, then an interrupt: as a preemption's SIGTERM, it reaches the agents,
  // and each saves.
  auto training = [&](int i) {
    return ReadWholeFile(absl::StrCat(dir, "/run/agent-", i, "/agent.log"))
               .find("first minibatch") != std::string::npos;
  };
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while (!(training(0) && training(1)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  train->Signal(SIGINT);
  REQUIRE(train->Wait(absl::Minutes(2)).has_value());
  for (int i = 0; i < 2; ++i) {
    INFO(ReadWholeFile(absl::StrCat(dir, "/run/agent-", i, "/agent.log")));
    CHECK(std::filesystem::exists(absl::StrCat(dir, "/run/replay/agent-", i, ".replay")));
  }

  std::vector<std::string> second = run;
  second.push_back("--minutes=0.1");
  second.push_back("--resume");
  absl::StatusOr<Subprocess> resumed = Subprocess::Start(second, dir + "/second.log");
  REQUIRE(resumed.ok());
  const std::optional<int> code = resumed->Wait(absl::Minutes(3));
  INFO(ReadWholeFile(dir + "/second.log"));
  CHECK(code == 0);
  for (int i = 0; i < 2; ++i) {
    const std::string log = ReadWholeFile(absl::StrCat(dir, "/run/agent-", i, "/agent.log"));
    INFO(log);
    CHECK_THAT(log, Catch::Matchers::ContainsSubstring(absl::StrCat(
                        "agent-", i, ": resumed from ", dir, "/run/replay/agent-", i, ".replay")));
  }
  CHECK_THAT(ReadWholeFile(dir + "/run/convoy_ps.log"),
             Catch::Matchers::ContainsSubstring("resumed from"));
}

}  // namespace
}  // namespace convoy::agent
