#include "common/metrics/metrics.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

using testing::MakeTempDir;
using testing::ReadWholeFile;

std::unique_ptr<MetricsLog> MustOpen(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(dir);
  REQUIRE(log.ok());
  return *std::move(log);
}

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(ReadWholeFile(path), '\n', absl::SkipEmpty());
}

TEST_CASE("A declared table is a CSV file with its header") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("episodes", {"episode", "return", "length"}, "episode").ok());
  CHECK(log->TablePath("episodes") == dir + "/episodes.csv");
  CHECK(ReadWholeFile(dir + "/episodes.csv") == "episode,return,length\n");
}

TEST_CASE("Appended rows are in the CSV file as soon as Append returns") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("episodes", {"episode", "return", "length"}, "episode").ok());
  REQUIRE(log->Append("episodes", {1, 12.5, 200}).ok());
  REQUIRE(log->Append("episodes", {2, -3.75, 17}).ok());
  // The log is still open: nothing waits for a destructor.
  CHECK(Lines(dir + "/episodes.csv") ==
        std::vector<std::string>{"episode,return,length", "1,12.5,200", "2,-3.75,17"});
}

TEST_CASE("CSV values read back as the same doubles") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("t", {"step", "x"}, "step").ok());
  const std::vector<double> values = {0.1, 1.0 / 3.0, 123456789.123456789, 1e-300, -2.5e17};
  for (double value : values) REQUIRE(log->Append("t", {1, value}).ok());
  const std::vector<std::string> lines = Lines(dir + "/t.csv");
  REQUIRE(lines.size() == values.size() + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string cell = lines[i + 1].substr(lines[i + 1].find(',') + 1);
    CHECK(std::stod(cell) == values[i]);
  }
}

TEST_CASE("Non-finite values are written as nan and inf") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("t", {"step", "a", "b", "c"}, "step").ok());
  REQUIRE(log->Append("t", {5, std::nan(""), INFINITY, -INFINITY}).ok());
  CHECK(Lines(dir + "/t.csv").at(1) == "5,nan,inf,-inf");
}

TEST_CASE("Each row appears as TensorBoard scalars tagged table slash column at the step") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("intervals", {"seconds", "env_steps", "loss"}, "env_steps").ok());
  REQUIRE(log->Append("intervals", {10, 5000, 0.5}).ok());
  REQUIRE(log->Append("intervals", {20, 9000, 0.25}).ok());

  absl::StatusOr<std::vector<ScalarEvent>> scalars = ReadScalars(log->event_file_path());
  REQUIRE(scalars.ok());
  REQUIRE(scalars->size() == 4);
  CHECK((*scalars)[0].tag == "intervals/seconds");
  CHECK((*scalars)[0].step == 5000);
  CHECK((*scalars)[0].value == 10);
  CHECK((*scalars)[1].tag == "intervals/loss");
  CHECK((*scalars)[1].value == 0.5);
  CHECK((*scalars)[3].tag == "intervals/loss");
  CHECK((*scalars)[3].step == 9000);
  CHECK((*scalars)[3].value == 0.25);
}

TEST_CASE("A row with the wrong number of values is rejected and not written") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("t", {"step", "x"}, "step").ok());
  CHECK(log->Append("t", {1}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(log->Append("t", {1, 2, 3}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Lines(dir + "/t.csv").size() == 1);
  CHECK(ReadScalars(log->event_file_path())->empty());
}

TEST_CASE("A row whose step is not finite is rejected") {
  auto log = MustOpen(MakeTempDir("metrics"));
  REQUIRE(log->DeclareTable("t", {"step", "x"}, "step").ok());
  CHECK(log->Append("t", {std::nan(""), 1}).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Appending to an undeclared table fails with NOT_FOUND") {
  auto log = MustOpen(MakeTempDir("metrics"));
  CHECK(log->Append("episodes", {1}).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Bad table declarations are rejected") {
  auto log = MustOpen(MakeTempDir("metrics"));
  using Code = absl::StatusCode;
  CHECK(log->DeclareTable("", {"a"}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("../escape", {"a"}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("t", {}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("t", {"a", "a"}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("t", {"a", "b,c"}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("t", {"a", ""}, "a").code() == Code::kInvalidArgument);
  CHECK(log->DeclareTable("t", {"a", "b"}, "c").code() == Code::kInvalidArgument);
  REQUIRE(log->DeclareTable("t", {"a", "b"}, "a").ok());
  CHECK(log->DeclareTable("t", {"a", "b"}, "a").code() == Code::kAlreadyExists);
}

TEST_CASE("A reopened log directory continues a table with the same header") {
  const std::string dir = MakeTempDir("metrics");
  {
    auto log = MustOpen(dir);
    REQUIRE(log->DeclareTable("episodes", {"episode", "return"}, "episode").ok());
    REQUIRE(log->Append("episodes", {1, 2}).ok());
  }
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("episodes", {"episode", "return"}, "episode").ok());
  REQUIRE(log->Append("episodes", {2, 3}).ok());
  CHECK(Lines(dir + "/episodes.csv") == std::vector<std::string>{"episode,return", "1,2", "2,3"});
}

TEST_CASE("A reopened log directory refuses a table whose header changed") {
  const std::string dir = MakeTempDir("metrics");
  {
    auto log = MustOpen(dir);
    REQUIRE(log->DeclareTable("episodes", {"episode", "return"}, "episode").ok());
  }
  auto log = MustOpen(dir);
  CHECK(log->DeclareTable("episodes", {"episode", "return", "length"}, "episode").code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("Rows appended from several threads are all written whole") {
  const std::string dir = MakeTempDir("metrics");
  auto log = MustOpen(dir);
  REQUIRE(log->DeclareTable("t", {"step", "thread"}, "step").ok());
  constexpr int kThreads = 4;
  constexpr int kRows = 200;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, &failed, t] {
      for (int i = 0; i < kRows; ++i) {
        if (!log->Append("t", {double(i), double(t)}).ok()) ++failed;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failed == 0);  // On the test's thread: Catch2's assertions are not thread-safe.
  const std::vector<std::string> lines = Lines(dir + "/t.csv");
  CHECK(lines.size() == kThreads * kRows + 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    CHECK(cells.size() == 2);
  }
  CHECK(ReadScalars(log->event_file_path())->size() == kThreads * kRows);
}

TEST_CASE("A moving average is the mean of the last N values") {
  MovingAverage average(3);
  CHECK(average.empty());
  CHECK(average.value() == 0.0);
  average.Add(3);
  CHECK(average.value() == 3.0);
  average.Add(6);
  CHECK(average.value() == 4.5);
  average.Add(9);
  CHECK(average.value() == 6.0);
  average.Add(12);
  CHECK(average.count() == 3);
  CHECK(average.value() == 9.0);
}

TEST_CASE("A rate meter counts events per second over its trailing window") {
  const absl::Time start = absl::FromUnixSeconds(1000);
  RateMeter rate(absl::Seconds(10), start);
  CHECK(rate.PerSecond(start) == 0.0);

  SECTION("before a whole window has passed the rate is over the time since start") {
    rate.Record(50, start + absl::Seconds(1));
    rate.Record(50, start + absl::Seconds(2));
    CHECK(rate.PerSecond(start + absl::Seconds(4)) == Approx(25.0));
  }
  SECTION("events older than the window no longer count") {
    rate.Record(1000, start + absl::Seconds(1));
    rate.Record(100, start + absl::Seconds(12));
    rate.Record(100, start + absl::Seconds(15));
    CHECK(rate.PerSecond(start + absl::Seconds(15)) == Approx(20.0));
    CHECK(rate.PerSecond(start + absl::Seconds(30)) == 0.0);
  }
}

TEST_CASE("Opening a metrics log creates its directory") {
  const std::string dir = MakeTempDir("metrics") + "/runs/a/agent_0";
  auto log = MustOpen(dir);
  CHECK(std::filesystem::is_directory(dir));
  CHECK(std::filesystem::exists(log->event_file_path()));
}

}  // namespace
}  // namespace convoy
