// AgentMetrics: convoy_agent's Prometheus metrics (docs/deploy.md, "Monitoring", lists them). The
// counters of the run (env steps, train steps, episodes, replay fill, epsilon, where the sync
// stands) are read from Agent::stats() when scraped; the exchanges with the servers (pushes by
// their answer, push and pull latency) are observed as they end, as a SyncObserver. Every sample
// carries the agent's `agent` label.
#ifndef CONVOY_AGENT_AGENT_METRICS_H_
#define CONVOY_AGENT_AGENT_METRICS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_stats.h"
#include "agent/client/sync_observer.h"
#include "common/metrics/prometheus_endpoint.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace convoy::agent {

class AgentMetrics : public prometheus::Collectable, public SyncObserver {
 public:
  explicit AgentMetrics(std::string agent_id);

  // Where the run's counters are read from; until it is set, a scrape has only the exchanges. Once
  // it returns, no scrape reads the source it replaced.
  void SetStats(std::function<AgentStats()> stats) ABSL_LOCKS_EXCLUDED(mu_);

  void Trained(const std::string& agent_id, uint64_t minibatches) override;
  void Answered(const LoggedPush& push, const PushAnswer& answer) override;
  void Pushed(uint32_t shard, absl::Duration time, bool answered) override;
  void Pulled(uint32_t shard, absl::Duration time, bool ok) override;

  std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_);

  // The families of one stats snapshot.
  void AddStats(const AgentStats& stats, MetricFamilies& out) const;
  // The time split (common/support/time_split.h) as CPU-second counters by phase.
  void AddTimeSplit(const AgentStats& s, MetricFamilies& out) const;
  void AddReplayCheckpoints(const AgentStats& s, MetricFamilies& out) const;

 private:
  const std::string agent_id_;
  mutable absl::Mutex mu_;
  std::function<AgentStats()> stats_ ABSL_GUARDED_BY(mu_);
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& answers_;
  prometheus::Family<prometheus::Histogram>& push_seconds_;
  prometheus::Family<prometheus::Histogram>& pull_seconds_;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_AGENT_METRICS_H_
