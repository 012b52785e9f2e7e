// PsMetrics: convoy_ps's Prometheus metrics (docs/deploy.md, "Monitoring", lists them). Each scrape
// reads one GetStatus snapshot, so its counters and gauges are what GetStatus answers at that
// moment; the histograms of the optimizer steps (their duration, the staleness of the pushes they
// applied) are observed as the steps are taken. Every sample carries the shard's `shard` label.
#ifndef CONVOY_PARAM_SERVER_SERVICE_PS_METRICS_H_
#define CONVOY_PARAM_SERVER_SERVICE_PS_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/metrics/prometheus_endpoint.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/server_part.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace convoy::ps {

// An agent that pushed or pulled within this long counts as connected
// (convoy_ps_agents_connected).
inline constexpr absl::Duration kConnectedWithin = absl::Seconds(60);

class PsMetrics : public prometheus::Collectable, public StepObserver {
 public:
  // `status` gives the snapshot a scrape reads (the service's GetStatus); `run` the run settings
  // the info metric carries (RunConfig's scalar fields but the per-agent epsilon). `now` is the
  // clock of the checkpoint's age and of "connected".
  PsMetrics(
      uint32_t shard, std::function<v1::StatusResponse()> status, const v1::RunConfig& run,
      std::function<absl::Time()> now = [] { return absl::Now(); });

  void Stepped(const AppliedStep& step) override;
  std::vector<prometheus::MetricFamily> Collect() const override;

  // The families of one status snapshot, without the step histograms.
  void AddStatus(const v1::StatusResponse& status, MetricFamilies& out) const;

 private:
  // AddStatus's counters of pushes, bytes, pulls and checkpoints, and its view of each agent.
  void AddCounters(const v1::StatusResponse& status, MetricFamilies& out) const;
  void AddAgents(const v1::StatusResponse& status, absl::Time now, MetricFamilies& out) const;

  const std::string shard_;
  const std::function<v1::StatusResponse()> status_;
  const MetricLabels run_labels_;
  const std::function<absl::Time()> now_;
  prometheus::Registry registry_;
  prometheus::Histogram* apply_seconds_;
  prometheus::Histogram* staleness_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_PS_METRICS_H_
