// The table of every metric convoy serves (common/metrics/metric_table.h): its rows follow
// Prometheus' conventions; the alert rules, the dashboard and docs/deploy.md's list name only its
// metrics, and the list names every one; and the check a scrape is put to (each collector's test
// runs it on what the collector serves) finds each way a scrape can differ from the table.
#include "common/metrics/metric_table.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/catch.h"

namespace convoy {
namespace {

std::string ReadSource(const std::string& path) {
  std::ifstream in(std::string(CONVOY_SOURCE_DIR) + "/" + path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The names in `text` that look like a convoy metric: convoy_ps_..., convoy_agent_...,
// convoy_sim_...
std::set<std::string> MetricLikeNames(const std::string& text) {
  static const std::regex kName("\\bconvoy_(ps|agent|sim)_[a-z0-9_]*[a-z0-9]");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

TEST_CASE("Every row of the metric table follows Prometheus' conventions", "[metrics]") {
  std::set<absl::string_view> names;
  for (const MetricSpec& row : MetricTable()) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);
    CHECK((absl::StartsWith(row.name, "convoy_ps_") ||
           absl::StartsWith(row.name, "convoy_agent_") ||
           absl::StartsWith(row.name, "convoy_sim_")));
    CHECK(absl::EndsWith(row.name, "_total") == (row.type == MetricType::kCounter));
    CHECK(absl::EndsWith(row.name, "_info") == (row.unit == "1"));
    CHECK((absl::StrContains(row.name, "_seconds") == (row.unit == "seconds")));
    CHECK((absl::StrContains(row.name, "_bytes") == (row.unit == "bytes")));
    CHECK_FALSE(row.unit.empty());
    CHECK(absl::EndsWith(row.help, "."));
    CHECK_FALSE(absl::StrContains(row.labels, " "));
    // A server's samples name their shard first, an agent's its id.
    if (absl::StartsWith(row.name, "convoy_ps_")) CHECK(absl::StartsWith(row.labels, "shard"));
    if (absl::StartsWith(row.name, "convoy_agent_")) CHECK(absl::StartsWith(row.labels, "agent"));
    CHECK(FindMetric(row.name) == &row);
  }
  const MetricSpec* bucket = FindMetric("convoy_ps_apply_duration_seconds_bucket", /*series=*/true);
  REQUIRE(bucket != nullptr);
  CHECK(bucket->name == metric::kPsApplyDuration.name);
  CHECK(FindMetric("convoy_ps_apply_duration_seconds_bucket") == nullptr);
  CHECK(FindMetric("convoy_ps_version_count", /*series=*/true) == nullptr);  // A gauge.
}

TEST_CASE(
    "The alert rules, the dashboard and docs/deploy.md's list name only the table's metrics, and "
    "the list names every one",
    "[metrics]") {
  for (const char* path :
       {"deploy/monitoring/convoy-alerts.yml", "deploy/monitoring/convoy-alerts_test.yml",
        "deploy/monitoring/convoy-dashboard.json"}) {
    const std::set<std::string> named = MetricLikeNames(ReadSource(path));
    CHECK_FALSE(named.empty());
    for (const std::string& name : named) {
      INFO(path << " names " << name << ", which is no metric of common/metrics/metric_table.h");
      CHECK(FindMetric(name, /*series=*/true) != nullptr);
    }
  }
  const std::string deploy = ReadSource("docs/deploy.md");
  const size_t start = deploy.find("\n### The metrics\n");
  REQUIRE(start != std::string::npos);
  const std::string list = deploy.substr(start, deploy.find("\n### ", start + 1) - start);
  const std::set<std::string> listed = MetricLikeNames(list);
  for (const std::string& name : listed) {
    INFO("docs/deploy.md's list names " << name << ", which is no metric of the table");
    CHECK(FindMetric(name) != nullptr);
  }
  for (const MetricSpec& row : MetricTable()) {
    INFO("docs/deploy.md's list (\"The metrics\") leaves out " << row.name);
    CHECK(listed.count(std::string(row.name)) == 1);
  }
}

TEST_CASE("A scrape is checked against the table: each way it can differ is named", "[metrics]") {
  const std::string good =
      "# HELP convoy_ps_version Version of the master weights (one per optimizer step).\n"
      "# TYPE convoy_ps_version gauge\n"
      "convoy_ps_version{shard=\"0\"} 3\n"
      "# HELP convoy_ps_pulls_total Pulls answered: with weights, or none newer to send.\n"
      "# TYPE convoy_ps_pulls_total counter\n"
      "convoy_ps_pulls_total{result=\"sent\",shard=\"0\"} 1\n"
      "convoy_ps_apply_duration_seconds_bucket{shard=\"0\",le=\"+Inf\"} 2\n"
      "convoy_ps_apply_duration_seconds_count{shard=\"0\"} 2\n"
      "convoy_ps_run_info{shard=\"0\",run_id=\"a,}b\\\"c\",incarnation=\"1\","
      "model_fingerprint=\"f\",num_shards=\"1\",batch_size=\"32\"} 1\n"
      "convoy_sim_requests_total 5\n"
      "# TYPE exposer_scrapes_total counter\n"
      "exposer_scrapes_total 1\n";
  const absl::Status ok = CheckScrapeAgainstTable(good);
  INFO(ok);
  CHECK(ok.ok());

  auto error = [](const std::string& scrape) {
    const absl::Status s = CheckScrapeAgainstTable(scrape);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK(absl::StrContains(error("convoy_ps_versions{shard=\"0\"} 3\n"),
                          "convoy_ps_versions is served but is no row"));
  CHECK(absl::StrContains(error("# TYPE convoy_ps_version counter\n"),
                          "convoy_ps_version is served as a counter, the table says gauge"));
  CHECK(absl::StrContains(error("# HELP convoy_ps_version The version.\n"),
                          "convoy_ps_version's HELP is 'The version.'"));
  CHECK(absl::StrContains(error("convoy_ps_version 3\n"),
                          "convoy_ps_version carries the labels {}, the table's row says {shard}"));
  CHECK(absl::StrContains(error("convoy_ps_pulls_total{shard=\"0\"} 1\n"),
                          "carries the labels {shard}, the table's row says {shard,result}"));
  CHECK(
      absl::StrContains(error("convoy_ps_version{shard=\"0\",agent=\"a\"} 1\n"), "{shard,agent}"));
  CHECK(absl::StrContains(error("convoy_ps_run_info{shard=\"0\",run_id=\"r\"} 1\n"),
                          "convoy_ps_run_info carries the labels {shard,run_id}"));
  CHECK(absl::StrContains(error("convoy_ps_version_count{shard=\"0\"} 3\n"), "no row"));
  CHECK(absl::StrContains(error("convoy_ps_version{shard=\"0} 3\n"), "end quote"));
}

}  // namespace
}  // namespace convoy
