#include "common/metrics/prometheus_endpoint.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "glog/logging.h"
#include "prometheus/exposer.h"

namespace convoy {

namespace {

prometheus::MetricType PrometheusType(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

}  // namespace

prometheus::ClientMetric& MetricFamilies::Sample(const MetricSpec& metric,
                                                 const MetricLabels& labels) {
  prometheus::MetricFamily* family = nullptr;
  for (prometheus::MetricFamily& f : families_) {
    if (f.name == metric.name) family = &f;
  }
  if (family == nullptr) {
    family = &families_.emplace_back();
    family->name = std::string(metric.name);
    family->help = std::string(metric.help);
    family->type = PrometheusType(metric.type);
  }
  prometheus::ClientMetric& sample = family->metric.emplace_back();
  for (const auto& [label, value] : labels) sample.label.push_back({label, value});
  return sample;
}

void MetricFamilies::Set(const MetricSpec& metric, double value, const MetricLabels& labels) {
  if (metric.type == MetricType::kCounter) {
    Sample(metric, labels).counter.value = value;
  } else {
    CHECK(metric.type == MetricType::kGauge) << metric.name << " is a histogram";
    Sample(metric, labels).gauge.value = value;
  }
}

void MetricFamilies::Histogram(const MetricSpec& metric, const prometheus::Histogram& histogram,
                               const MetricLabels& labels) {
  CHECK(metric.type == MetricType::kHistogram) << metric.name << " is no histogram";
  Sample(metric, labels).histogram = histogram.Collect().histogram;
}

prometheus::Family<prometheus::Counter>& RegisterCounter(const MetricSpec& metric,
                                                         prometheus::Registry& registry) {
  CHECK(metric.type == MetricType::kCounter) << metric.name << " is no counter";
  return prometheus::BuildCounter()
      .Name(std::string(metric.name))
      .Help(std::string(metric.help))
      .Register(registry);
}

prometheus::Family<prometheus::Histogram>& RegisterHistogram(const MetricSpec& metric,
                                                             prometheus::Registry& registry) {
  CHECK(metric.type == MetricType::kHistogram) << metric.name << " is no histogram";
  return prometheus::BuildHistogram()
      .Name(std::string(metric.name))
      .Help(std::string(metric.help))
      .Register(registry);
}

void MetricFamilies::Add(std::vector<prometheus::MetricFamily> families) {
  for (prometheus::MetricFamily& family : families) families_.push_back(std::move(family));
}

std::vector<prometheus::MetricFamily> CollectedMetrics::Collect() const {
  MetricFamilies families;
  collect_(families);
  return families.Take();
}

absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> PrometheusEndpoint::Start(
    const std::string& address,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_address: '", address, "' is not host:port (e.g. 0.0.0.0:9464, 127.0.0.1:0)"));
  }
  std::unique_ptr<PrometheusEndpoint> endpoint(new PrometheusEndpoint());
  try {
    // One serving thread: a scrape is one short request, and the port is the scraper's alone.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address: cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address: nothing listening on ", address));
  }
  endpoint->port_ = ports.front();
  endpoint->collectables_ = std::move(collectables);
  for (const std::shared_ptr<prometheus::Collectable>& c : endpoint->collectables_) {
    endpoint->exposer_->RegisterCollectable(c);
  }
  return endpoint;
}

absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> PrometheusEndpoint::Serve(
    const MetricsEndpointSettings& settings,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  const std::string& address = settings.metrics_address;
  if (address.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> endpoint =
      Start(address, std::move(collectables));
  if (!endpoint.ok()) return endpoint.status();
  if (const std::string& file = settings.metrics_port_file; !file.empty()) {
    if (absl::Status s = WriteFileAtomically(file, absl::StrCat((*endpoint)->port(), "\n"), 0644);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--metrics_port_file: ", s.message()));
    }
  }
  LOG(INFO) << "Prometheus metrics at http://" << address.substr(0, address.rfind(':')) << ":"
            << (*endpoint)->port() << "/metrics";
  return endpoint;
}

PrometheusEndpoint::~PrometheusEndpoint() {
  // The Exposer's threads stop before the collectables they read go.
  exposer_.reset();
}

}  // namespace convoy
