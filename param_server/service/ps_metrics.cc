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
  apply_seconds_ = &RegisterHistogram(metric::kPsApplyDuration, registry_)
                        .Add({{"shard", shard_}}, prometheus::Histogram::BucketBoundaries{
                                                      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05, 0.1, 0.25, 0.5, 1, 2.5});
  staleness_ = &RegisterHistogram(metric::kPsPushStaleness, registry_)
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
  out.Set(metric::kPsRunInfo, 1, info);
  out.Set(metric::kPsVersion, static_cast<double>(s.version()), shard);
  out.Set(metric::kPsTargetVersion, static_cast<double>(s.target_version()), shard);
  out.Set(metric::kPsParameters, static_cast<double>(s.parameter_count()), shard);
  out.Set(metric::kPsEpsilon, s.epsilon(), shard);
  out.Set(metric::kPsUptime, s.uptime_seconds(), shard);

  AddCounters(s, out);
  out.Set(metric::kPsCheckpointVersion, static_cast<double>(s.checkpoint_version()), shard);
  out.Set(metric::kPsCheckpointTimestamp, static_cast<double>(s.checkpoint_unix_ms()) / 1000,
          shard);
  out.Set(metric::kPsCheckpointAge,
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
  out.Histogram(metric::kPsApplyBatchPushes, batches, shard);

  out.Set(metric::kPsPushesQueued, s.pushes_queued(), shard);
  out.Set(metric::kPsPushBuffers, s.push_buffers(), shard);
  out.Set(metric::kPsPushBuffersInUse, s.push_buffers_in_use(), shard);
  out.Set(metric::kPsPushesWaiting, s.pushes_waiting(), shard);
  out.Set(metric::kPsPullsWaiting, s.pulls_waiting(), shard);

  AddAgents(s, now, out);
}

void PsMetrics::AddCounters(const v1::StatusResponse& s, MetricFamilies& out) const {
  const MetricLabels shard = {{"shard", shard_}};
  auto with = [&](std::string name, std::string value) {
    MetricLabels labels = shard;
    labels.emplace_back(std::move(name), std::move(value));
    return labels;
  };
  out.Set(metric::kPsPushesAccepted, static_cast<double>(s.updates_applied()), shard);
  // Every reason a push can be refused for, 0 until it happens, so that rate() sees the first.
  std::map<std::string, uint64_t> refused;
  for (int r = v1::RejectReason_MIN; r <= v1::RejectReason_MAX; ++r) {
    if (!v1::RejectReason_IsValid(r) || r == v1::REJECT_REASON_UNSPECIFIED) continue;
    refused[v1::RejectReason_Name(static_cast<v1::RejectReason>(r))] = 0;
  }
  for (const auto& [reason, count] : s.rejections()) refused[reason] = count;
  for (const auto& [reason, count] : refused) {
    out.Set(metric::kPsPushesRefused, static_cast<double>(count),
            with("reason", ReasonLabel(reason)));
  }
  out.Set(metric::kPsPushesRepeated, static_cast<double>(s.repeated_pushes()), shard);
  out.Set(metric::kPsAppliedMinibatches, static_cast<double>(s.applied_minibatches()), shard);
  out.Set(metric::kPsApplySteps, static_cast<double>(s.apply_steps()), shard);
  out.Set(metric::kPsReceivedBytes, static_cast<double>(s.bytes_in()), shard);
  out.Set(metric::kPsSentBytes, static_cast<double>(s.bytes_out()), shard);
  out.Set(metric::kPsPulls, static_cast<double>(s.pulls_served()), with("result", "sent"));
  out.Set(metric::kPsPulls, static_cast<double>(s.pulls_not_newer()), with("result", "not_newer"));
  out.Set(metric::kPsUnauthenticatedCalls, static_cast<double>(s.unauthenticated_calls()), shard);
  out.Set(metric::kPsCheckpointsWritten, static_cast<double>(s.checkpoints_written()), shard);
  out.Set(metric::kPsCheckpointFailures, static_cast<double>(s.checkpoint_failures()), shard);
}

void PsMetrics::AddAgents(const v1::StatusResponse& s, absl::Time now, MetricFamilies& out) const {
  const MetricLabels shard = {{"shard", shard_}};
  int connected = 0;
  for (const v1::AgentStatus& agent : s.agents()) {
    const absl::Time seen = absl::FromUnixMillis(agent.last_seen_unix_ms());
    if (now - seen <= kConnectedWithin) ++connected;
    MetricLabels labels = shard;
    labels.emplace_back("agent", agent.agent_id());
    out.Set(metric::kPsAgentLastSeen, static_cast<double>(agent.last_seen_unix_ms()) / 1000,
            labels);
    out.Set(metric::kPsAgentStaleness, static_cast<double>(agent.last_staleness()), labels);
    out.Set(metric::kPsAgentEpsilon, agent.epsilon(), labels);
    out.Set(metric::kPsAgentPushesAccepted, static_cast<double>(agent.pushes_accepted()), labels);
    out.Set(metric::kPsAgentPushesRefused, static_cast<double>(agent.pushes_rejected()), labels);
  }
  out.Set(metric::kPsAgents, static_cast<double>(s.agents_size()), shard);
  out.Set(metric::kPsAgentsConnected, connected, shard);
}

}  // namespace convoy::ps
