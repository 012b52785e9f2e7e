// The log records' one declaration (common/support/log_records.txt): it is compiled in, and a record is
// checked against it. The writers' own tests (push_log_test,
// apply_log_test, progress_record_test) write every record of theirs through it.
#include "common/support/log_record.h"

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

TEST_CASE("The compiled-in declaration is common/support/log_records.txt's", "[log_record]") {
  std::ifstream in(std::string(CONVOY_SOURCE_DIR) + "/common/support/log_records.txt");
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

}  // namespace
}  // namespace convoy
