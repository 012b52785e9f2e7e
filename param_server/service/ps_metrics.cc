#include "param_server/service/ps_metrics.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"

namespace convoy::ps {
namespace {

// The run settings as labels: RunConfig's scalar fields, by their proto names, but `epsilon` (an
// agent's, not the run's).
MetricLabels RunLabels(const v1::RunConfig& run) {
  MetricLabels labels;
  const google::protobuf::Descriptor* descriptor = run.GetDescriptor();
  const google::protobuf::Reflection* reflection = run.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated() || field->name() == "epsilon") continue;
    if (field->has_presence() && !reflection->HasField(run, field)) continue;
    std::string value;
    switch (field->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        value = reflection->GetString(run, field);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        value = absl::StrCat(reflection->GetUInt32(run, field));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
        value = absl::StrCat(reflection->GetUInt64(run, field));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        value = absl::StrCat(reflection->GetDouble(run, field));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        value = reflection->GetBool(run, field) ? "true" : "false";
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
        value = reflection->GetEnum(run, field)->name();
        break;
      default:
        continue;
    }
    labels.emplace_back(field->name(), std::move(value));
  }
  return labels;
}

// REJECT_REASON_STALE -> "stale".
std::string ReasonLabel(const std::string& name) {
  return absl::AsciiStrToLower(absl::StripPrefix(name, "REJECT_REASON_"));
}

}  // namespace

PsMetrics::PsMetrics(uint32_t shard, std::function<v1::StatusResponse()> status,
                     const v1::RunConfig& run, std::function<absl::Time()> now)
    : shard_(absl::StrCat(shard)),
      status_(std::move(status)),
      run_labels_(RunLabels(run)),
      now_(std::move(now)) {
  apply_seconds_ =
      &prometheus::BuildHistogram()
           .Name("convoy_ps_apply_duration_seconds")
           .Help("Optimizer steps by their duration: the step and the publish of its weights.")
           .Register(registry_)
           .Add({{"shard", shard_}},
                prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                        0.05, 0.1, 0.25, 0.5, 1, 2.5});
  staleness_ = &prometheus::BuildHistogram()
                    .Name("convoy_ps_push_staleness_versions")
                    .Help(
                        "Applied pushes by their staleness: the versions applied between the "
                        "weights a push was computed on and its step.")
                    .Register(registry_)
                    .Add({{"shard", shard_}}, prometheus::Histogram::BucketBoundaries{
                                                  0, 1, 2, 4, 8, 16, 32, 64, 128, 256});
}

void PsMetrics::Stepped(const AppliedStep& step) {
  apply_seconds_->Observe(absl::ToDoubleSeconds(step.step_time));
  for (const AppliedPush& push : step.pushes) {
    staleness_->Observe(static_cast<double>(push.staleness));
  }
}

std::vector<prometheus::MetricFamily> PsMetrics::Collect() const {
  MetricFamilies families;
  AddStatus(status_(), families);
  families.Add(registry_.Collect());
  return families.Take();
}

void PsMetrics::AddStatus(const v1::StatusResponse& s, MetricFamilies& out) const {
  const MetricLabels shard = {{"shard", shard_}};
  const absl::Time now = now_();

  MetricLabels info = shard;
  info.emplace_back("run_id", s.run_id());
  // A label, not a value: 64 random bits do not fit a sample's double.
  info.emplace_back("incarnation", absl::StrCat(s.incarnation()));
  info.emplace_back("model_fingerprint", s.model_fingerprint());
  info.emplace_back("num_shards", absl::StrCat(std::max<uint32_t>(1, s.shard().num_shards())));
  info.insert(info.end(), run_labels_.begin(), run_labels_.end());
  out.Gauge("convoy_ps_run_info",
            "The run, this server start (incarnation) and the run's settings, as the server hands "
            "them to agents.",
            1, info);
  out.Gauge("convoy_ps_version", "Version of the master weights (one per optimizer step).",
            static_cast<double>(s.version()), shard);
  out.Gauge("convoy_ps_target_version", "Version of the target network's snapshot.",
            static_cast<double>(s.target_version()), shard);
  out.Gauge("convoy_ps_parameters", "Parameters this server serves (its slice of the model).",
            static_cast<double>(s.parameter_count()), shard);
  out.Gauge("convoy_ps_epsilon", "The exploration rate of the global schedule.", s.epsilon(),
            shard);
  out.Gauge("convoy_ps_uptime_seconds", "Seconds since this server started.", s.uptime_seconds(),
            shard);

  AddCounters(s, out);
  out.Gauge("convoy_ps_checkpoint_version",
            "Version of the newest checkpoint this run wrote or resumed from (0: none).",
            static_cast<double>(s.checkpoint_version()), shard);
  out.Gauge("convoy_ps_checkpoint_timestamp_seconds",
            "When the newest checkpoint was written or resumed from, Unix seconds (0: none).",
            static_cast<double>(s.checkpoint_unix_ms()) / 1000, shard);
  out.Gauge("convoy_ps_checkpoint_age_seconds",
            "Seconds since the newest checkpoint, or since the start when there is none.",
            s.checkpoint_unix_ms() > 0
                ? absl::ToDoubleSeconds(now - absl::FromUnixMillis(s.checkpoint_unix_ms()))
                : s.uptime_seconds(),
            shard);

  // Batches by their pushes: drained_batches is exact, so the histogram's buckets are too.
  prometheus::Histogram::BucketBoundaries bounds;
  for (double bound = 1; bound < 2 * std::max<uint32_t>(1, s.max_pushes_per_step()); bound *= 2) {
    bounds.push_back(bound);
  }
  std::vector<double> per_bucket(bounds.size() + 1, 0);  // The last: +Inf.
  double pushes_drained = 0;
  for (const auto& [pushes, count] : s.drained_batches()) {
    const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), pushes) - bounds.begin();
    per_bucket[static_cast<size_t>(bucket)] += static_cast<double>(count);
    pushes_drained += static_cast<double>(pushes) * static_cast<double>(count);
  }
  prometheus::Histogram batches(bounds);
  batches.ObserveMultiple(per_bucket, pushes_drained);
  out.Histogram("convoy_ps_apply_batch_pushes",
                "Batches the apply worker drained, by the pushes each held (applied or not).",
                batches, shard);

  out.Gauge("convoy_ps_pushes_queued", "Pushes received whole, waiting for the apply worker.",
            s.pushes_queued(), shard);
  out.Gauge("convoy_ps_push_buffers", "Model-sized receive buffers: the bound on pushes in flight.",
            s.push_buffers(), shard);
  out.Gauge("convoy_ps_push_buffers_in_use", "Push buffers being received, queued or applied.",
            s.push_buffers_in_use(), shard);
  out.Gauge("convoy_ps_pushes_waiting", "Push streams waiting for a buffer.", s.pushes_waiting(),
            shard);
  out.Gauge("convoy_ps_pulls_waiting", "Pulls waiting for their turn.", s.pulls_waiting(), shard);

  AddAgents(s, now, out);
}

void PsMetrics::AddCounters(const v1::StatusResponse& s, MetricFamilies& out) const {
  const MetricLabels shard = {{"shard", shard_}};
  auto with = [&](std::string name, std::string value) {
    MetricLabels labels = shard;
    labels.emplace_back(std::move(name), std::move(value));
    return labels;
  };
  out.Counter("convoy_ps_pushes_accepted_total", "Pushes applied (counted on across --resume).",
              static_cast<double>(s.updates_applied()), shard);
  // Every reason a push can be refused for, 0 until it happens, so that rate() sees the first.
  std::map<std::string, uint64_t> refused;
  for (int r = v1::RejectReason_MIN; r <= v1::RejectReason_MAX; ++r) {
    if (!v1::RejectReason_IsValid(r) || r == v1::REJECT_REASON_UNSPECIFIED) continue;
    refused[v1::RejectReason_Name(static_cast<v1::RejectReason>(r))] = 0;
  }
  for (const auto& [reason, count] : s.rejections()) refused[reason] = count;
  for (const auto& [reason, count] : refused) {
    out.Counter("convoy_ps_pushes_refused_total", "Pushes refused, by reason (nothing applied).",
                static_cast<double>(count), with("reason", ReasonLabel(reason)));
  }
  out.Counter("convoy_ps_pushes_repeated_total",
              "Retries of a push already answered: answered again, not applied.",
              static_cast<double>(s.repeated_pushes()), shard);
  out.Counter("convoy_ps_applied_minibatches_total", "Minibatches the applied pushes averaged.",
              static_cast<double>(s.applied_minibatches()), shard);
  out.Counter("convoy_ps_apply_steps_total", "Optimizer steps taken by this process.",
              static_cast<double>(s.apply_steps()), shard);
  out.Counter("convoy_ps_received_bytes_total", "Bytes of gradient chunks received.",
              static_cast<double>(s.bytes_in()), shard);
  out.Counter("convoy_ps_sent_bytes_total", "Bytes of weight chunks sent.",
              static_cast<double>(s.bytes_out()), shard);
  out.Counter("convoy_ps_pulls_total", "Pulls answered: with weights, or none newer to send.",
              static_cast<double>(s.pulls_served()), with("result", "sent"));
  out.Counter("convoy_ps_pulls_total", "Pulls answered: with weights, or none newer to send.",
              static_cast<double>(s.pulls_not_newer()), with("result", "not_newer"));
  out.Counter("convoy_ps_unauthenticated_calls_total",
              "Calls refused for a missing or wrong bearer token.",
              static_cast<double>(s.unauthenticated_calls()), shard);
  out.Counter("convoy_ps_checkpoints_written_total", "Checkpoints this process wrote.",
              static_cast<double>(s.checkpoints_written()), shard);
  out.Counter("convoy_ps_checkpoint_failures_total", "Checkpoints this process failed to write.",
              static_cast<double>(s.checkpoint_failures()), shard);
}

void PsMetrics::AddAgents(const v1::StatusResponse& s, absl::Time now, MetricFamilies& out) const {
  const MetricLabels shard = {{"shard", shard_}};
  int connected = 0;
  for (const v1::AgentStatus& agent : s.agents()) {
    const absl::Time seen = absl::FromUnixMillis(agent.last_seen_unix_ms());
    if (now - seen <= kConnectedWithin) ++connected;
    MetricLabels labels = shard;
    labels.emplace_back("agent", agent.agent_id());
    out.Gauge("convoy_ps_agent_last_seen_timestamp_seconds",
              "When the agent last pushed, pulled or joined, Unix seconds.",
              static_cast<double>(agent.last_seen_unix_ms()) / 1000, labels);
    out.Gauge("convoy_ps_agent_staleness_versions", "Staleness of the agent's last applied push.",
              static_cast<double>(agent.last_staleness()), labels);
    out.Gauge("convoy_ps_agent_epsilon", "The agent's exploration rate.", agent.epsilon(), labels);
    out.Counter("convoy_ps_agent_pushes_accepted_total", "The agent's pushes applied.",
                static_cast<double>(agent.pushes_accepted()), labels);
    out.Counter("convoy_ps_agent_pushes_refused_total", "The agent's pushes refused.",
                static_cast<double>(agent.pushes_rejected()), labels);
  }
  out.Gauge("convoy_ps_agents", "Agents that joined this server start.",
            static_cast<double>(s.agents_size()), shard);
  out.Gauge("convoy_ps_agents_connected", "Agents that pushed, pulled or joined in the last 60 s.",
            connected, shard);
}

}  // namespace convoy::ps
