#include "agent/agent_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace convoy::agent {
namespace {

// Exchanges take milliseconds on a LAN and seconds on a shaped link or under load.
const prometheus::Histogram::BucketBoundaries& ExchangeBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return *buckets;
}

}  // namespace

AgentMetrics::AgentMetrics(std::string agent_id)
    : agent_id_(std::move(agent_id)),
      answers_(RegisterCounter(metric::kAgentPushes, registry_)),
      push_seconds_(RegisterHistogram(metric::kAgentPushDuration, registry_)),
      pull_seconds_(RegisterHistogram(metric::kAgentPullDuration, registry_)) {}

void AgentMetrics::SetStats(std::function<AgentStats()> stats) {
  absl::MutexLock lock(&mu_);
  stats_ = std::move(stats);
}

void AgentMetrics::Trained(const std::string&, uint64_t) {}  // Read from the stats.

void AgentMetrics::Answered(const LoggedPush& push, const PushAnswer& answer) {
  const char* result = answer.repeated ? "repeated" : answer.accepted ? "applied" : "refused";
  answers_.Add({{"agent", agent_id_}, {"shard", absl::StrCat(push.shard)}, {"result", result}})
      .Increment();
}

void AgentMetrics::Pushed(uint32_t shard, absl::Duration time, bool answered) {
  push_seconds_
      .Add({{"agent", agent_id_}, {"shard", absl::StrCat(shard)}, {"ok", answered ? "1" : "0"}},
           ExchangeBuckets())
      .Observe(absl::ToDoubleSeconds(time));
}

void AgentMetrics::Pulled(uint32_t shard, absl::Duration time, bool ok) {
  pull_seconds_
      .Add({{"agent", agent_id_}, {"shard", absl::StrCat(shard)}, {"ok", ok ? "1" : "0"}},
           ExchangeBuckets())
      .Observe(absl::ToDoubleSeconds(time));
}

std::vector<prometheus::MetricFamily> AgentMetrics::Collect() const {
  MetricFamilies families;
  {
    // Read under the lock, so that SetStats returns only once no scrape reads the old source.
    absl::MutexLock lock(&mu_);
    if (stats_) AddStats(stats_(), families);
  }
  families.Add(registry_.Collect());
  return families.Take();
}

void AgentMetrics::AddStats(const AgentStats& s, MetricFamilies& out) const {
  const MetricLabels agent = {{"agent", agent_id_}};
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  out.Set(metric::kAgentEnvSteps, d(s.env_steps), agent);
  out.Set(metric::kAgentTrainSteps, d(s.train_steps), agent);
  out.Set(metric::kAgentEpisodes, d(s.episodes), agent);
  out.Set(metric::kAgentEpisodeReturn, s.last_return, agent);
  out.Set(metric::kAgentEpisodeReturnMean, s.average_return, agent);
  out.Set(metric::kAgentEpsilon, s.epsilon, agent);
  out.Set(metric::kAgentReplayTransitions, d(s.replay_size), agent);
  out.Set(metric::kAgentReplayCapacity, d(s.replay_capacity), agent);
  out.Set(metric::kAgentInStep, s.connected ? 1 : 0, agent);
  out.Set(metric::kAgentPsVersion, d(s.ps_version), agent);
  out.Set(metric::kAgentOutagePushes, d(s.outage_pushes), agent);
  out.Set(metric::kAgentSimulatorOutages, d(s.simulator_outages), agent);
  AddReplayCheckpoints(s, out);
  AddTimeSplit(s, out);
}

void AgentMetrics::AddTimeSplit(const AgentStats& s, MetricFamilies& out) const {
  auto phase = [this](absl::string_view name) -> MetricLabels {
    return {{"agent", agent_id_}, {"phase", std::string(name)}};
  };
  for (int p = 0; p < kAgentPhases; ++p) {
    const AgentPhase each = static_cast<AgentPhase>(p);
    if (each == AgentPhase::kWait) continue;
    out.Set(metric::kAgentCpuSeconds, s.time[each], phase(AgentPhaseKey(each)));
  }
  out.Set(metric::kAgentCpuSeconds, s.time.sampler_cpu, phase("sampler"));
  out.Set(metric::kAgentCpuSeconds, s.time.other_threads_cpu(), phase("threads"));
  out.Set(metric::kAgentWaitSeconds, s.time[AgentPhase::kWait], {{"agent", agent_id_}});
}

void AgentMetrics::AddReplayCheckpoints(const AgentStats& s, MetricFamilies& out) const {
  const MetricLabels agent = {{"agent", agent_id_}};
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  out.Set(metric::kAgentReplayCheckpoints, d(s.replay_checkpoints), agent);
  out.Set(metric::kAgentReplayCheckpointFailures, d(s.replay_checkpoint_failures), agent);
  out.Set(metric::kAgentReplayCheckpointDuration, s.replay_checkpoint_seconds, agent);
  out.Set(metric::kAgentReplayCheckpointBytes, d(s.replay_checkpoint_bytes), agent);
  out.Set(metric::kAgentReplayCheckpointTimestamp, s.replay_checkpoint_unix_seconds, agent);
  out.Set(metric::kAgentResumedTransitions, d(s.resumed_transitions), agent);
  out.Set(metric::kAgentFirstTrain, s.first_train_seconds, agent);
}

}  // namespace convoy::agent
