// The agent's Prometheus metrics as a scrape collects them: the run's counters from its stats, the
// exchanges from the sync's observer calls.
#include "agent/agent_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "common/metrics/metric_table.h"
#include "prometheus/text_serializer.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

// The families by name, and one sample's value by its labels.
double Value(const std::vector<prometheus::MetricFamily>& families, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& sample : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : sample.label) have[label.name] = label.value;
      if (have != labels) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return sample.counter.value;
        case prometheus::MetricType::Gauge:
          return sample.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(sample.histogram.sample_count);
        default:
          FAIL("unexpected type of " << name);
      }
    }
  }
  FAIL("no sample " << name << " with the labels asked for");
  return 0;
}

TEST_CASE("An agent's metrics are its stats when scraped, and its exchanges as they ended",
          "[metrics]") {
  AgentMetrics metrics("agent-3");
  // Before the agent exists: the exchanges only, no stats.
  for (const prometheus::MetricFamily& family : metrics.Collect()) {
    CHECK(family.name.rfind("convoy_agent_env_steps", 0) == std::string::npos);
  }
  AgentStats stats;
  stats.env_steps = 1200;
  stats.train_steps = 75;
  stats.episodes = 4;
  stats.last_return = -2.5;
  stats.average_return = 1.25;
  stats.epsilon = 0.4;
  stats.replay_size = 1100;
  stats.replay_capacity = 50000;
  stats.connected = true;
  stats.ps_version = 31;
  stats.replay_checkpoints = 3;
  stats.replay_checkpoint_failures = 1;
  stats.replay_checkpoint_seconds = 2.5;
  stats.replay_checkpoint_bytes = 83700000;
  stats.replay_checkpoint_unix_seconds = 1.8e9;
  stats.resumed_transitions = 1000;
  stats.first_train_seconds = 1.5;
  stats.time[AgentPhase::kEnvironment] = 3;
  stats.time[AgentPhase::kTrain] = 20;
  stats.time[AgentPhase::kWait] = 0.5;
  stats.time.sampler_cpu = 2;
  stats.time.process_cpu = 28;
  metrics.SetStats([&stats] { return stats; });

  PushAnswer applied;
  applied.accepted = true;
  PushAnswer repeated = applied;
  repeated.repeated = true;
  PushAnswer refused;
  LoggedPush push;
  push.shard = 1;
  metrics.Answered(push, applied);
  metrics.Answered(push, applied);
  metrics.Answered(push, repeated);
  metrics.Answered(push, refused);
  metrics.Pushed(1, absl::Milliseconds(12), true);
  metrics.Pushed(1, absl::Seconds(31), false);
  metrics.Pulled(1, absl::Milliseconds(3), true);

  const std::vector<prometheus::MetricFamily> families = metrics.Collect();
  const std::map<std::string, std::string> agent = {{"agent", "agent-3"}};
  CHECK(Value(families, "convoy_agent_env_steps_total", agent) == 1200);
  CHECK(Value(families, "convoy_agent_train_steps_total", agent) == 75);
  CHECK(Value(families, "convoy_agent_episodes_total", agent) == 4);
  CHECK(Value(families, "convoy_agent_episode_return", agent) == -2.5);
  CHECK(Value(families, "convoy_agent_episode_return_mean", agent) == 1.25);
  CHECK(Value(families, "convoy_agent_epsilon", agent) == 0.4);
  CHECK(Value(families, "convoy_agent_replay_transitions", agent) == 1100);
  CHECK(Value(families, "convoy_agent_replay_capacity_transitions", agent) == 50000);
  CHECK(Value(families, "convoy_agent_in_step", agent) == 1);
  CHECK(Value(families, "convoy_agent_ps_version", agent) == 31);
  CHECK(Value(families, "convoy_agent_replay_checkpoints_total", agent) == 3);
  CHECK(Value(families, "convoy_agent_replay_checkpoint_failures_total", agent) == 1);
  CHECK(Value(families, "convoy_agent_replay_checkpoint_duration_seconds", agent) == 2.5);
  CHECK(Value(families, "convoy_agent_replay_checkpoint_bytes", agent) == 83700000);
  CHECK(Value(families, "convoy_agent_replay_checkpoint_timestamp_seconds", agent) == 1.8e9);
  CHECK(Value(families, "convoy_agent_resumed_transitions", agent) == 1000);
  CHECK(Value(families, "convoy_agent_first_train_seconds", agent) == 1.5);
  auto phase = [](const std::string& name) {
    return std::map<std::string, std::string>{{"agent", "agent-3"}, {"phase", name}};
  };
  CHECK(Value(families, "convoy_agent_cpu_seconds_total", phase("env")) == 3);
  CHECK(Value(families, "convoy_agent_cpu_seconds_total", phase("train")) == 20);
  CHECK(Value(families, "convoy_agent_cpu_seconds_total", phase("inference")) == 0);
  CHECK(Value(families, "convoy_agent_cpu_seconds_total", phase("sampler")) == 2);
  // What the process used beyond the acting thread (23 s) and the sampler (2 s).
  CHECK(Value(families, "convoy_agent_cpu_seconds_total", phase("threads")) == 3);
  CHECK(Value(families, "convoy_agent_wait_seconds_total", agent) == 0.5);
  auto of = [](const std::string& result) {
    return std::map<std::string, std::string>{
        {"agent", "agent-3"}, {"shard", "1"}, {"result", result}};
  };
  CHECK(Value(families, "convoy_agent_pushes_total", of("applied")) == 2);
  CHECK(Value(families, "convoy_agent_pushes_total", of("repeated")) == 1);
  CHECK(Value(families, "convoy_agent_pushes_total", of("refused")) == 1);
  auto exchange = [](const std::string& ok) {
    return std::map<std::string, std::string>{{"agent", "agent-3"}, {"shard", "1"}, {"ok", ok}};
  };
  CHECK(Value(families, "convoy_agent_push_duration_seconds", exchange("1")) == 1);
  CHECK(Value(families, "convoy_agent_push_duration_seconds", exchange("0")) == 1);
  CHECK(Value(families, "convoy_agent_pull_duration_seconds", exchange("1")) == 1);

  // A new stats source replaces the old at once: the agent's last stats once it is gone.
  stats.env_steps = 1300;
  CHECK(Value(metrics.Collect(), "convoy_agent_env_steps_total", agent) == 1300);
  const AgentStats last = stats;
  metrics.SetStats([last] { return last; });
  stats.env_steps = 9999;
  CHECK(Value(metrics.Collect(), "convoy_agent_env_steps_total", agent) == 1300);

  // What prometheus-cpp serialises is the text format, with every family named once.
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  CHECK(text.find("# TYPE convoy_agent_pushes_total counter") != std::string::npos);
  CHECK(text.find("# TYPE convoy_agent_push_duration_seconds histogram") != std::string::npos);
  // Every family, its HELP and TYPE, and every sample's labels are the metric table's rows.
  const absl::Status as_declared = CheckScrapeAgainstTable(text);
  INFO(as_declared);
  CHECK(as_declared.ok());
}

}  // namespace
}  // namespace convoy::agent
