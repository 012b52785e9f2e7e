#include "agent/agent_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace convoy {
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
      answers_(prometheus::BuildCounter()
                   .Name("convoy_agent_pushes_total")
                   .Help("Pushes a server answered, by server shard and result: applied, repeated "
                         "(applied before: not again) or refused.")
                   .Register(registry_)),
      push_seconds_(prometheus::BuildHistogram()
                        .Name("convoy_agent_push_duration_seconds")
                        .Help("Pushes by their time from the first chunk to the answer, by server "
                              "shard and whether they were answered.")
                        .Register(registry_)),
      pull_seconds_(prometheus::BuildHistogram()
                        .Name("convoy_agent_pull_duration_seconds")
                        .Help("Pulls by their time, by server shard and whether they succeeded "
                              "(a followed pull: from the push's answer on).")
                        .Register(registry_)) {}

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
  out.Counter("convoy_agent_env_steps_total", "Environment steps driven.", d(s.env_steps), agent);
  out.Counter("convoy_agent_train_steps_total", "Minibatches trained on.", d(s.train_steps), agent);
  out.Counter("convoy_agent_episodes_total", "Episodes ended.", d(s.episodes), agent);
  out.Gauge("convoy_agent_episode_return", "Return of the newest episode.", s.last_return, agent);
  out.Gauge("convoy_agent_episode_return_mean", "Mean return of the last 20 episodes.",
            s.average_return, agent);
  out.Gauge("convoy_agent_epsilon", "The exploration rate in force.", s.epsilon, agent);
  out.Gauge("convoy_agent_replay_transitions", "Sampleable transitions in the replay memory.",
            d(s.replay_size), agent);
  out.Gauge("convoy_agent_replay_capacity_transitions", "The replay memory's capacity.",
            d(s.replay_capacity), agent);
  out.Gauge("convoy_agent_in_step",
            "1 while the agent is in step with its parameter server(s), 0 while out of step or "
            "training alone.",
            s.connected ? 1 : 0, agent);
  out.Gauge("convoy_agent_ps_version", "The server version of the weights the agent holds.",
            d(s.ps_version), agent);
  out.Counter("convoy_agent_outage_pushes_total",
              "Pushes of what was learned while a server was away.", d(s.outage_pushes), agent);
  out.Counter("convoy_agent_simulator_outages_total", "Times the simulator connection was lost.",
              d(s.simulator_outages), agent);
  AddReplayCheckpoints(s, out);
  AddTimeSplit(s, out);
}

void AgentMetrics::AddTimeSplit(const AgentStats& s, MetricFamilies& out) const {
  for (int p = 0; p < kAgentPhases; ++p) {
    const AgentPhase phase = static_cast<AgentPhase>(p);
    if (phase == AgentPhase::kWait) continue;
    out.Counter("convoy_agent_cpu_seconds_total",
                "CPU seconds by where they went (docs/benchmarks.md, \"Where an agent's time "
                "goes\"): the acting thread's phases, the sampler thread, the other threads.",
                s.time[phase], {{"agent", agent_id_}, {"phase", AgentPhaseKey(phase)}});
  }
  out.Counter("convoy_agent_cpu_seconds_total", "", s.time.sampler_cpu,
              {{"agent", agent_id_}, {"phase", "sampler"}});
  out.Counter("convoy_agent_cpu_seconds_total", "", s.time.other_threads_cpu(),
              {{"agent", agent_id_}, {"phase", "threads"}});
  out.Counter("convoy_agent_wait_seconds_total",
              "Wall seconds the acting thread waited on a minibatch or on the server's answer.",
              s.time[AgentPhase::kWait], {{"agent", agent_id_}});
}

void AgentMetrics::AddReplayCheckpoints(const AgentStats& s, MetricFamilies& out) const {
  const MetricLabels agent = {{"agent", agent_id_}};
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  out.Counter("convoy_agent_replay_checkpoints_total",
              "Replay checkpoints written (--replay_checkpoint_dir).", d(s.replay_checkpoints),
              agent);
  out.Counter("convoy_agent_replay_checkpoint_failures_total",
              "Replay checkpoints that failed (the previous one stays).",
              d(s.replay_checkpoint_failures), agent);
  out.Gauge("convoy_agent_replay_checkpoint_duration_seconds",
            "The newest replay checkpoint's time to write, from its snapshot to its rename.",
            s.replay_checkpoint_seconds, agent);
  out.Gauge("convoy_agent_replay_checkpoint_bytes", "The newest replay checkpoint's size.",
            d(s.replay_checkpoint_bytes), agent);
  out.Gauge("convoy_agent_replay_checkpoint_timestamp_seconds",
            "Unix time of the newest replay checkpoint (0: none yet).",
            s.replay_checkpoint_unix_seconds, agent);
  out.Gauge("convoy_agent_resumed_transitions",
            "Transitions this process loaded from a replay checkpoint at its start (--resume).",
            d(s.resumed_transitions), agent);
  out.Gauge("convoy_agent_first_train_seconds",
            "Seconds from this process's start to its first minibatch (0: none yet).",
            s.first_train_seconds, agent);
}

}  // namespace convoy
