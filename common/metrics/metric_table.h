// Every Prometheus metric a convoy process serves, declared once: its name, type, unit, labels and
// help. The collectors (param_server/service/ps_metrics.cc, agent/agent_metrics.cc, convoy_sim's
// simulator_bridge/airsim/airsim_metrics.cc) name a metric by its row here, never by a string; the
// suite checks what each collector serves, the alert rules, the dashboard and docs/deploy.md's list
// against this table (tests/common/metrics/metric_table_test.cc).
//
// Adding a metric is one row: X(id, name, type, unit, labels, help)
// - id: the constant's name in convoy::metric (kPsVersion);
// - name: Prometheus' conventions: base units (seconds, bytes), counters end in _total, an info
//   metric in _info;
// - type: kCounter, kGauge or kHistogram;
// - unit: what one of the value counts, in words ("seconds", "pushes"; "1" for an info metric);
// - labels: the label names every sample carries, comma-separated (in any order on the wire); a
//   trailing ",..." admits more (convoy_ps_run_info's run settings);
// - help: the HELP line.
#ifndef CONVOY_COMMON_METRICS_METRIC_TABLE_H_
#define CONVOY_COMMON_METRICS_METRIC_TABLE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#define CONVOY_METRICS(X)                                                                          \
  /* convoy_ps: one sample per shard (a server process), read from GetStatus when scraped. */      \
  X(kPsRunInfo, "convoy_ps_run_info", kGauge, "1",                                                 \
    "shard,run_id,incarnation,model_fingerprint,num_shards,...",                                   \
    "The run, this server start (incarnation) and the run's settings, as the server hands them "   \
    "to agents.")                                                                                  \
  X(kPsVersion, "convoy_ps_version", kGauge, "versions", "shard",                                  \
    "Version of the master weights (one per optimizer step).")                                     \
  X(kPsTargetVersion, "convoy_ps_target_version", kGauge, "versions", "shard",                     \
    "Version of the target network's snapshot.")                                                   \
  X(kPsParameters, "convoy_ps_parameters", kGauge, "parameters", "shard",                          \
    "Parameters this server serves (its slice of the model).")                                     \
  X(kPsEpsilon, "convoy_ps_epsilon", kGauge, "probability", "shard",                               \
    "The exploration rate of the global schedule.")                                                \
  X(kPsUptime, "convoy_ps_uptime_seconds", kGauge, "seconds", "shard",                             \
    "Seconds since this server started.")                                                          \
  X(kPsPushesAccepted, "convoy_ps_pushes_accepted_total", kCounter, "pushes", "shard",             \
    "Pushes applied (counted on across --resume).")                                                \
  X(kPsPushesRefused, "convoy_ps_pushes_refused_total", kCounter, "pushes", "shard,reason",        \
    "Pushes refused, by reason (nothing applied).")                                                \
  X(kPsPushesRepeated, "convoy_ps_pushes_repeated_total", kCounter, "pushes", "shard",             \
    "Retries of a push already answered: answered again, not applied.")                            \
  X(kPsAppliedMinibatches, "convoy_ps_applied_minibatches_total", kCounter, "minibatches",         \
    "shard", "Minibatches the applied pushes averaged.")                                           \
  X(kPsApplySteps, "convoy_ps_apply_steps_total", kCounter, "steps", "shard",                      \
    "Optimizer steps taken by this process.")                                                      \
  X(kPsReceivedBytes, "convoy_ps_received_bytes_total", kCounter, "bytes", "shard",                \
    "Bytes of gradient chunks received.")                                                          \
  X(kPsSentBytes, "convoy_ps_sent_bytes_total", kCounter, "bytes", "shard",                        \
    "Bytes of weight chunks sent.")                                                                \
  X(kPsPulls, "convoy_ps_pulls_total", kCounter, "pulls", "shard,result",                          \
    "Pulls answered: with weights, or none newer to send.")                                        \
  X(kPsUnauthenticatedCalls, "convoy_ps_unauthenticated_calls_total", kCounter, "calls", "shard",  \
    "Calls refused for a missing or wrong bearer token.")                                          \
  X(kPsCheckpointsWritten, "convoy_ps_checkpoints_written_total", kCounter, "checkpoints",         \
    "shard", "Checkpoints this process wrote.")                                                    \
  X(kPsCheckpointFailures, "convoy_ps_checkpoint_failures_total", kCounter, "checkpoints",         \
    "shard", "Checkpoints this process failed to write.")                                          \
  X(kPsCheckpointVersion, "convoy_ps_checkpoint_version", kGauge, "versions", "shard",             \
    "Version of the newest checkpoint this run wrote or resumed from (0: none).")                  \
  X(kPsCheckpointTimestamp, "convoy_ps_checkpoint_timestamp_seconds", kGauge, "seconds", "shard",  \
    "When the newest checkpoint was written or resumed from, Unix seconds (0: none).")             \
  X(kPsCheckpointAge, "convoy_ps_checkpoint_age_seconds", kGauge, "seconds", "shard",              \
    "Seconds since the newest checkpoint, or since the start when there is none.")                 \
  X(kPsApplyDuration, "convoy_ps_apply_duration_seconds", kHistogram, "seconds", "shard",          \
    "Optimizer steps by their duration: the step and the publish of its weights.")                 \
  X(kPsApplyBatchPushes, "convoy_ps_apply_batch_pushes", kHistogram, "pushes", "shard",            \
    "Batches the apply worker drained, by the pushes each held (applied or not).")                 \
  X(kPsPushStaleness, "convoy_ps_push_staleness_versions", kHistogram, "versions", "shard",        \
    "Applied pushes by their staleness: the versions applied between the weights a push was "      \
    "computed on and its step.")                                                                   \
  X(kPsPushesQueued, "convoy_ps_pushes_queued", kGauge, "pushes", "shard",                         \
    "Pushes received whole, waiting for the apply worker.")                                        \
  X(kPsPushBuffers, "convoy_ps_push_buffers", kGauge, "buffers", "shard",                          \
    "Model-sized receive buffers: the bound on pushes in flight.")                                 \
  X(kPsPushBuffersInUse, "convoy_ps_push_buffers_in_use", kGauge, "buffers", "shard",              \
    "Push buffers being received, queued or applied.")                                             \
  X(kPsPushesWaiting, "convoy_ps_pushes_waiting", kGauge, "pushes", "shard",                       \
    "Push streams waiting for a buffer.")                                                          \
  X(kPsPullsWaiting, "convoy_ps_pulls_waiting", kGauge, "pulls", "shard",                          \
    "Pulls waiting for their turn.")                                                               \
  X(kPsAgentLastSeen, "convoy_ps_agent_last_seen_timestamp_seconds", kGauge, "seconds",            \
    "shard,agent", "When the agent last pushed, pulled or joined, Unix seconds.")                  \
  X(kPsAgentStaleness, "convoy_ps_agent_staleness_versions", kGauge, "versions", "shard,agent",    \
    "Staleness of the agent's last applied push.")                                                 \
  X(kPsAgentEpsilon, "convoy_ps_agent_epsilon", kGauge, "probability", "shard,agent",              \
    "The agent's exploration rate.")                                                               \
  X(kPsAgentPushesAccepted, "convoy_ps_agent_pushes_accepted_total", kCounter, "pushes",           \
    "shard,agent", "The agent's pushes applied.")                                                  \
  X(kPsAgentPushesRefused, "convoy_ps_agent_pushes_refused_total", kCounter, "pushes",             \
    "shard,agent", "The agent's pushes refused.")                                                  \
  X(kPsAgents, "convoy_ps_agents", kGauge, "agents", "shard",                                      \
    "Agents that joined this server start.")                                                       \
  X(kPsAgentsConnected, "convoy_ps_agents_connected", kGauge, "agents", "shard",                   \
    "Agents that pushed, pulled or joined in the last 60 s.")                                      \
  /* convoy_agent: every sample carries the agent's id. */                                         \
  X(kAgentEnvSteps, "convoy_agent_env_steps_total", kCounter, "steps", "agent",                    \
    "Environment steps driven.")                                                                   \
  X(kAgentTrainSteps, "convoy_agent_train_steps_total", kCounter, "minibatches", "agent",          \
    "Minibatches trained on.")                                                                     \
  X(kAgentEpisodes, "convoy_agent_episodes_total", kCounter, "episodes", "agent",                  \
    "Episodes ended.")                                                                             \
  X(kAgentEpisodeReturn, "convoy_agent_episode_return", kGauge, "reward", "agent",                 \
    "Return of the newest episode.")                                                               \
  X(kAgentEpisodeReturnMean, "convoy_agent_episode_return_mean", kGauge, "reward", "agent",        \
    "Mean return of the last 20 episodes.")                                                        \
  X(kAgentEpsilon, "convoy_agent_epsilon", kGauge, "probability", "agent",                         \
    "The exploration rate in force.")                                                              \
  X(kAgentReplayTransitions, "convoy_agent_replay_transitions", kGauge, "transitions", "agent",    \
    "Sampleable transitions in the replay memory.")                                                \
  X(kAgentReplayCapacity, "convoy_agent_replay_capacity_transitions", kGauge, "transitions",       \
    "agent", "The replay memory's capacity.")                                                      \
  X(kAgentInStep, "convoy_agent_in_step", kGauge, "boolean", "agent",                              \
    "1 while the agent is in step with its parameter server(s), 0 while out of step or training "  \
    "alone.")                                                                                      \
  X(kAgentPsVersion, "convoy_agent_ps_version", kGauge, "versions", "agent",                       \
    "The server version of the weights the agent holds.")                                          \
  X(kAgentOutagePushes, "convoy_agent_outage_pushes_total", kCounter, "pushes", "agent",           \
    "Pushes of what was learned while a server was away.")                                         \
  X(kAgentSimulatorOutages, "convoy_agent_simulator_outages_total", kCounter, "outages", "agent",  \
    "Times the simulator connection was lost.")                                                    \
  X(kAgentPushes, "convoy_agent_pushes_total", kCounter, "pushes", "agent,shard,result",           \
    "Pushes a server answered, by server shard and result: applied, repeated (applied before: "    \
    "not again) or refused.")                                                                      \
  X(kAgentPushDuration, "convoy_agent_push_duration_seconds", kHistogram, "seconds",               \
    "agent,shard,ok",                                                                              \
    "Pushes by their time from the first chunk to the answer, by server shard and whether they "   \
    "were answered.")                                                                              \
  X(kAgentPullDuration, "convoy_agent_pull_duration_seconds", kHistogram, "seconds",               \
    "agent,shard,ok",                                                                              \
    "Pulls by their time, by server shard and whether they succeeded (a followed pull: from the "  \
    "push's answer on).")                                                                          \
  X(kAgentReplayCheckpoints, "convoy_agent_replay_checkpoints_total", kCounter, "checkpoints",     \
    "agent", "Replay checkpoints written (--replay_checkpoint_dir).")                              \
  X(kAgentReplayCheckpointFailures, "convoy_agent_replay_checkpoint_failures_total", kCounter,     \
    "checkpoints", "agent", "Replay checkpoints that failed (the previous one stays).")            \
  X(kAgentReplayCheckpointDuration, "convoy_agent_replay_checkpoint_duration_seconds", kGauge,     \
    "seconds", "agent",                                                                            \
    "The newest replay checkpoint's time to write, from its snapshot to its rename.")              \
  X(kAgentReplayCheckpointBytes, "convoy_agent_replay_checkpoint_bytes", kGauge, "bytes", "agent", \
    "The newest replay checkpoint's size.")                                                        \
  X(kAgentReplayCheckpointTimestamp, "convoy_agent_replay_checkpoint_timestamp_seconds", kGauge,   \
    "seconds", "agent", "Unix time of the newest replay checkpoint (0: none yet).")                \
  X(kAgentResumedTransitions, "convoy_agent_resumed_transitions", kGauge, "transitions", "agent",  \
    "Transitions this process loaded from a replay checkpoint at its start (--resume).")           \
  X(kAgentFirstTrain, "convoy_agent_first_train_seconds", kGauge, "seconds", "agent",              \
    "Seconds from this process's start to its first minibatch (0: none yet).")                     \
  X(kAgentCpuSeconds, "convoy_agent_cpu_seconds_total", kCounter, "seconds", "agent,phase",        \
    "CPU seconds by where they went (docs/benchmarks.md, \"Where an agent's time goes\"): the "    \
    "acting thread's phases, the sampler thread, the other threads.")                              \
  X(kAgentWaitSeconds, "convoy_agent_wait_seconds_total", kCounter, "seconds", "agent",            \
    "Wall seconds the acting thread waited on a minibatch or on the server's answer.")             \
  /* convoy_sim. */                                                                                \
  X(kSimSteps, "convoy_sim_steps_total", kCounter, "steps", "vehicle",                             \
    "Physics steps served, by car.")                                                               \
  X(kSimRequests, "convoy_sim_requests_total", kCounter, "requests", "",                           \
    "AirSim RPC requests answered.")                                                               \
  X(kSimConnections, "convoy_sim_connections_total", kCounter, "connections", "result",            \
    "Connections: accepted, refused (over --max_connections), or closed for errors.")

namespace convoy {

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricSpec {
  absl::string_view name;
  MetricType type;
  absl::string_view unit;
  absl::string_view labels;  // Comma-separated; a trailing ",..." admits more.
  absl::string_view help;
};

namespace metric {
#define CONVOY_METRIC_CONSTANT(id, name, type, unit, labels, help) \
  inline constexpr MetricSpec id{name, MetricType::type, unit, labels, help};
CONVOY_METRICS(CONVOY_METRIC_CONSTANT)
#undef CONVOY_METRIC_CONSTANT
}  // namespace metric

// The table's rows in its order.
absl::Span<const MetricSpec> MetricTable();

// The row of `name`, or null. A histogram's series (name_bucket, name_sum, name_count) find it too
// when `series` is true.
const MetricSpec* FindMetric(absl::string_view name, bool series = false);

// Checks a scrape in Prometheus' text format against the table: every family it declares (its
// `# TYPE` line) is a row of the table with that type and its HELP text, and every sample carries
// the row's labels, no fewer and no others (a histogram's `le` aside). prometheus-cpp's own
// endpoint metrics (exposer_*) are not convoy's and are skipped. Errors: INVALID_ARGUMENT naming
// the first metric that differs and how.
absl::Status CheckScrapeAgainstTable(absl::string_view scrape);

}  // namespace convoy

#endif  // CONVOY_COMMON_METRICS_METRIC_TABLE_H_
