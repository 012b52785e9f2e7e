// Prometheus metrics of a long-running convoy process (convoy_ps, convoy_agent, convoy_sim), served
// in the Prometheus text format at http://--metrics_address/metrics by prometheus-cpp's Exposer.
//
// The port answers GET /metrics and nothing else: no request changes any state of the process, and
// there is no other path (docs/deploy.md, "Monitoring", says how it is kept to the scraper). A
// process's metrics are collected when scraped, from the same snapshot its own status report reads
// (convoy_ps: GetStatus), so a scrape and a GetStatus at the same moment agree.
#ifndef CONVOY_COMMON_METRICS_PROMETHEUS_ENDPOINT_H_
#define CONVOY_COMMON_METRICS_PROMETHEUS_ENDPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metric_table.h"
#include "common/support/settings_table.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

// Where a process serves its metrics (common/support/settings_table.h: a binary that serves them
// expands CONVOY_SETTINGS_FLAGS(CONVOY_METRICS_ENDPOINT_SETTINGS, ...)).
#define CONVOY_METRICS_ENDPOINT_SETTINGS(X)                                                  \
  X(std::string, metrics_address, "",                                                        \
    "host:port to serve Prometheus metrics on, at /metrics (GET only: the port changes "     \
    "nothing); port 0 picks a free one (see --metrics_port_file). Empty: none. "             \
    "docs/deploy.md, \"Monitoring\".")                                                       \
  X(std::string, metrics_port_file, "",                                                      \
    "Write the metrics port bound to this file, whole or not at all (for --metrics_address " \
    "with port 0).")

namespace convoy {

struct MetricsEndpointSettings {
  CONVOY_METRICS_ENDPOINT_SETTINGS(CONVOY_SETTING_MEMBER)
};

// Label name -> value of one sample.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Builds the metric families of one scrape, each a row of common/metrics/metric_table.h (its name,
// type and HELP are the row's). A family given twice (one sample per label set) is one family.
class MetricFamilies {
 public:
  // A counter's or a gauge's sample.
  void Set(const MetricSpec& metric, double value, const MetricLabels& labels = {});
  // A histogram built elsewhere (prometheus::Histogram, e.g. filled by ObserveMultiple from counts
  // kept as they were), as a sample with `labels`.
  void Histogram(const MetricSpec& metric, const prometheus::Histogram& histogram,
                 const MetricLabels& labels = {});
  // Appends families collected elsewhere (a prometheus::Registry's).
  void Add(std::vector<prometheus::MetricFamily> families);

  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::ClientMetric& Sample(const MetricSpec& metric, const MetricLabels& labels);

  std::vector<prometheus::MetricFamily> families_;
};

// A family of metrics observed as they happen (prometheus-cpp's), named and described by its row of
// the table, which must be a counter's (RegisterCounter) or a histogram's (RegisterHistogram).
prometheus::Family<prometheus::Counter>& RegisterCounter(const MetricSpec& metric,
                                                         prometheus::Registry& registry);
prometheus::Family<prometheus::Histogram>& RegisterHistogram(const MetricSpec& metric,
                                                             prometheus::Registry& registry);

// A Collectable whose families `collect` writes on each scrape (on the Exposer's threads: `collect`
// must be thread-safe).
class CollectedMetrics : public prometheus::Collectable {
 public:
  explicit CollectedMetrics(std::function<void(MetricFamilies&)> collect)
      : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::function<void(MetricFamilies&)> collect_;
};

class PrometheusEndpoint {
 public:
  // Serves `collectables` at http://address/metrics ("host:port", "[v6]:port"; port 0 picks a free
  // one). Errors: INVALID_ARGUMENT naming --metrics_address when it has no port; UNAVAILABLE naming
  // the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> Start(
      const std::string& address,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  // Start at the settings' metrics_address; null (and OK) when it is empty. Writes the bound port
  // to metrics_port_file when that is set.
  static absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> Serve(
      const MetricsEndpointSettings& settings,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  ~PrometheusEndpoint();

  // The port bound.
  int port() const { return port_; }

 private:
  PrometheusEndpoint() = default;

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_METRICS_PROMETHEUS_ENDPOINT_H_
