// The log records' one declaration (common/log_records.txt): it is compiled in, a record is checked
// against it, and a line read back names what it lacks. The writers' own tests (push_log_test,
// apply_log_test, progress_record_test) write every record of theirs through it.
#include "common/log_record.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/catch.h"

namespace convoy {
namespace {

std::vector<std::string> Names(const LogRecordFormat& format) {
  std::vector<std::string> names;
  for (const LogRecordFormat::Key& key : format.keys) names.push_back(key.name);
  return names;
}

TEST_CASE("The compiled-in declaration is common/log_records.txt's", "[log_record]") {
  std::ifstream in(std::string(CONVOY_SOURCE_DIR) + "/common/log_records.txt");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<LogRecordFormat>> from_file = ParseLogRecordFormats(text.str());
  REQUIRE(from_file.ok());
  REQUIRE(from_file->size() == LogRecordFormats().size());
  for (size_t i = 0; i < from_file->size(); ++i) {
    CHECK((*from_file)[i].log == LogRecordFormats()[i].log);
    CHECK((*from_file)[i].kind == LogRecordFormats()[i].kind);
    CHECK(Names((*from_file)[i]) == Names(LogRecordFormats()[i]));
  }
  const LogRecordFormat* apply = FindLogRecordFormat("apply_log", "apply");
  REQUIRE(apply != nullptr);
  CHECK(Names(*apply) == std::vector<std::string>{"incarnation", "version", "agent", "session",
                                                  "sequence", "minibatches", "staleness"});
  CHECK(FindLogRecordFormat("apply_log", "push") == nullptr);
}

TEST_CASE("A declaration that is not 'log kind key...' is an error naming its line",
          "[log_record]") {
  CHECK(ParseLogRecordFormats("# comment\npush_log start agent\n").ok());
  absl::StatusOr<std::vector<LogRecordFormat>> parsed =
      ParseLogRecordFormats("push_log start agent\npush_log end\n");
  REQUIRE(!parsed.ok());
  CHECK(absl::StrContains(parsed.status().message(), "line 2"));
  parsed = ParseLogRecordFormats("a b x y x\n");
  REQUIRE(!parsed.ok());
  CHECK(absl::StrContains(parsed.status().message(), "'x' is declared twice"));
  parsed = ParseLogRecordFormats("a b x\na b y\n");
  REQUIRE(!parsed.ok());
  CHECK(absl::StrContains(parsed.status().message(), "a b is declared twice"));
}

TEST_CASE("A record's keys are its declared keys in order, optional ones possibly left out",
          "[log_record]") {
  const LogRecordFormat* start = FindLogRecordFormat("apply_log", "start");
  REQUIRE(start != nullptr);
  CHECK(CheckRecordKeys(*start, {"incarnation", "version"}).ok());
  CHECK(CheckRecordKeys(*start, {"incarnation", "version", "resumed_from"}).ok());
  absl::Status wrong = CheckRecordKeys(*start, {"version", "incarnation"});
  CHECK(wrong.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(wrong.message(),
                          "key 'version' is not declared there (expected "
                          "'incarnation')"));
  wrong = CheckRecordKeys(*start, {"incarnation"});
  CHECK(absl::StrContains(wrong.message(), "key 'version' is missing"));
  wrong = CheckRecordKeys(*start, {"incarnation", "version", "resumed_from", "extra"});
  CHECK(absl::StrContains(wrong.message(), "key 'extra' is not declared there"));

  CHECK(LogRecord("apply_log", "checkpoint").Add("incarnation", 7).Add("version", 12).Line() ==
        "checkpoint incarnation=7 version=12");
}

TEST_CASE("A record line reads back, and one that lacks a declared key names it", "[log_record]") {
  absl::StatusOr<ParsedLogRecord> read =
      ParseLogRecord("apply_log", "start incarnation=3 version=10 newer=1");
  REQUIRE(read.ok());
  CHECK(read->kind == "start");
  CHECK(read->fields.at("version") == "10");
  CHECK(read->fields.at("newer") == "1");  // A newer writer's key is kept.
  read = ParseLogRecord("apply_log", "apply incarnation=3 version=10");
  REQUIRE(!read.ok());
  CHECK(absl::StrContains(read.status().message(),
                          "apply line lacks the fields agent, session, sequence, minibatches, "
                          "staleness"));
  read = ParseLogRecord("apply_log", "restart incarnation=3");
  REQUIRE(!read.ok());
  CHECK(absl::StrContains(read.status().message(), "'restart' is not a record kind of apply_log"));
  read = ParseLogRecord("apply_log", "checkpoint incarnation=3 version");
  REQUIRE(!read.ok());
  CHECK(absl::StrContains(read.status().message(), "field 'version' is not key=value"));
}

}  // namespace
}  // namespace convoy
