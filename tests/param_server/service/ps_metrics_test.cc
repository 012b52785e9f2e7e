// convoy_ps's Prometheus metrics: a real loopback server with its metrics endpoint, scraped over
// HTTP the way Prometheus scrapes it, against GetStatus; and the endpoint's own errors.
#include "param_server/service/ps_metrics.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/metrics/metric_table.h"
#include "common/metrics/prometheus_endpoint.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/support/http.h"

namespace convoy::ps {
namespace {

using testing::LoopbackServer;

// One HTTP/1.0 request to 127.0.0.1:port: the status line and the body.
testing::HttpAnswer Http(int port, const std::string& request) {
  absl::StatusOr<testing::HttpAnswer> answer = testing::HttpExchange(port, request);
  REQUIRE(answer.ok());
  return *std::move(answer);
}

// The exposition's samples: "name{labels}" -> value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    REQUIRE(absl::SimpleAtod(line.substr(space + 1), &value));
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

ParameterServerOptions SgdOptions() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.max_staleness = 0;  // A push on an old version is refused STALE.
  return o;
}

TEST_CASE(
    "convoy_ps's /metrics agrees with GetStatus, counts each refusal by its reason, and "
    "observes each step",
    "[metrics]") {
  LoopbackServer ps(SgdOptions());
  auto metrics = std::make_shared<PsMetrics>(
      0, [&ps] { return ps.Status(); }, ps.server->core().RunConfigFor(0));
  ps.server->core().AddStepObserver(metrics);
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> endpoint =
      PrometheusEndpoint::Start("127.0.0.1:0", {metrics});
  REQUIRE(endpoint.ok());
  REQUIRE((*endpoint)->port() > 0);

  agent::PsClient client(ps.ClientOptions("agent-7"));
  const size_t n = ps.server->core().model().parameter_count;
  std::vector<float> gradient(n, 0.01f);
  const uint64_t incarnation = ps.Status().incarnation();
  for (uint64_t base = 0; base < 3; ++base) {
    absl::StatusOr<PushAnswer> pushed = client.Push(gradient.data(), n, base, 1, incarnation);
    REQUIRE(pushed.ok());
    REQUIRE(pushed->accepted);
  }
  absl::StatusOr<PushAnswer> stale = client.Push(gradient.data(), n, 1, 1, incarnation);
  REQUIRE(stale.ok());
  REQUIRE_FALSE(stale->accepted);
  std::vector<float> weights;
  REQUIRE(client.Pull(0, 0, v1::NETWORK_ONLINE, &weights).ok());

  const testing::HttpAnswer answer = Http((*endpoint)->port(), "GET /metrics HTTP/1.0\r\n\r\n");
  INFO(answer.body);
  CHECK(absl::StrContains(answer.status_line, "200"));
  const v1::StatusResponse status = ps.Status();  // Nothing moved since the scrape.
  const std::map<std::string, double> s = Samples(answer.body);
  auto at = [&s](const std::string& key) {
    INFO(key);
    REQUIRE(s.count(key) == 1);
    return s.at(key);
  };
  CHECK(at("convoy_ps_version{shard=\"0\"}") == 3);
  CHECK(at("convoy_ps_version{shard=\"0\"}") == status.version());
  CHECK(at("convoy_ps_pushes_accepted_total{shard=\"0\"}") == status.updates_applied());
  CHECK(at("convoy_ps_pushes_refused_total{shard=\"0\",reason=\"stale\"}") == 1);
  CHECK(at("convoy_ps_pushes_refused_total{shard=\"0\",reason=\"ahead\"}") == 0);
  CHECK(at("convoy_ps_received_bytes_total{shard=\"0\"}") == status.bytes_in());
  CHECK(at("convoy_ps_sent_bytes_total{shard=\"0\"}") == status.bytes_out());
  CHECK(at("convoy_ps_pulls_total{shard=\"0\",result=\"sent\"}") == status.pulls_served());
  CHECK(at("convoy_ps_parameters{shard=\"0\"}") == static_cast<double>(n));
  CHECK(at("convoy_ps_agents{shard=\"0\"}") == 1);
  CHECK(at("convoy_ps_agents_connected{shard=\"0\"}") == 1);
  CHECK(at("convoy_ps_agent_pushes_accepted_total{shard=\"0\",agent=\"agent-7\"}") == 3);
  CHECK(at("convoy_ps_agent_pushes_refused_total{shard=\"0\",agent=\"agent-7\"}") == 1);
  // Three steps observed; the three applied pushes were each computed on the newest version.
  CHECK(at("convoy_ps_apply_duration_seconds_count{shard=\"0\"}") == 3);
  CHECK(at("convoy_ps_push_staleness_versions_count{shard=\"0\"}") == 3);
  CHECK(at("convoy_ps_push_staleness_versions_bucket{shard=\"0\",le=\"0\"}") == 3);
  // Four pushes drained, each alone in its batch (they came one after another).
  CHECK(at("convoy_ps_apply_batch_pushes_count{shard=\"0\"}") == 4);
  CHECK(at("convoy_ps_apply_batch_pushes_bucket{shard=\"0\",le=\"1\"}") == 4);
  CHECK(at("convoy_ps_apply_batch_pushes_sum{shard=\"0\"}") == 4);
  // No checkpoint: its age counts from the start.
  CHECK(at("convoy_ps_checkpoint_version{shard=\"0\"}") == 0);
  CHECK(at("convoy_ps_checkpoint_age_seconds{shard=\"0\"}") >= 0);
  // The run's settings as one info sample, naming the run.
  bool info = false;
  for (const auto& [key, value] : s) {
    if (!absl::StartsWith(key, "convoy_ps_run_info{")) continue;
    info = true;
    CHECK(value == 1);
    CHECK(absl::StrContains(key, absl::StrCat("run_id=\"", status.run_id(), "\"")));
    CHECK(absl::StrContains(key, "model_name=\"tiny\""));
    CHECK(absl::StrContains(key, "optimizer=\"sgd\""));
  }
  CHECK(info);
  // Every family, its HELP and TYPE, and every sample's labels are the metric table's rows.
  const absl::Status as_declared = CheckScrapeAgainstTable(answer.body);
  INFO(as_declared);
  CHECK(as_declared.ok());
  // The families carry Prometheus' HELP and TYPE lines.
  CHECK(absl::StrContains(answer.body, "# TYPE convoy_ps_pushes_accepted_total counter"));
  CHECK(absl::StrContains(answer.body, "# TYPE convoy_ps_apply_duration_seconds histogram"));
}

TEST_CASE("The metrics port answers GET /metrics only, and changes nothing", "[metrics]") {
  LoopbackServer ps(SgdOptions());
  auto metrics = std::make_shared<PsMetrics>(
      0, [&ps] { return ps.Status(); }, ps.server->core().RunConfigFor(0));
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> endpoint =
      PrometheusEndpoint::Start("127.0.0.1:0", {metrics});
  REQUIRE(endpoint.ok());
  const v1::StatusResponse before = ps.Status();
  CHECK(absl::StrContains(Http((*endpoint)->port(), "GET / HTTP/1.0\r\n\r\n").status_line, "404"));
  CHECK(absl::StrContains(Http((*endpoint)->port(), "GET /checkpoint HTTP/1.0\r\n\r\n").status_line,
                          "404"));
  Http((*endpoint)->port(), "POST /metrics HTTP/1.0\r\nContent-Length: 4\r\n\r\nstop");
  const v1::StatusResponse after = ps.Status();
  CHECK(after.version() == before.version());
  CHECK(after.checkpoints_written() == before.checkpoints_written());
  CHECK(absl::StrContains(Http((*endpoint)->port(), "GET /metrics HTTP/1.0\r\n\r\n").status_line,
                          "200"));
}

TEST_CASE("A metrics address without a port, or a port taken, is refused naming it", "[metrics]") {
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> no_port =
      PrometheusEndpoint::Start("127.0.0.1", {});
  CHECK(no_port.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(no_port.status().message(), "--metrics_address"));
  CHECK(PrometheusEndpoint::Start("127.0.0.1:70000", {}).status().code() ==
        absl::StatusCode::kInvalidArgument);

  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> first =
      PrometheusEndpoint::Start("127.0.0.1:0", {});
  REQUIRE(first.ok());
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> second = PrometheusEndpoint::Start(taken, {});
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(second.status().message(), taken));
}

}  // namespace
}  // namespace convoy::ps
