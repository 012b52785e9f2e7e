#include "common/metrics/metric_table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace convoy {
namespace {

constexpr MetricSpec kRows[] = {
#define CONVOY_METRIC_ROW(id, name, type, unit, labels, help) metric::id,
    CONVOY_METRICS(CONVOY_METRIC_ROW)
#undef CONVOY_METRIC_ROW
};

constexpr absl::string_view kOpenLabels = ",...";

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "?";
}

// The HELP text as the text format escapes it (a backslash and a line break).
std::string EscapedHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The label names of a sample line's `{...}`, in order; `rest` starts after the metric's name.
absl::Status SampleLabelNames(absl::string_view rest, std::vector<std::string>* names) {
  if (!absl::ConsumePrefix(&rest, "{")) return absl::OkStatus();
  while (!absl::ConsumePrefix(&rest, "}")) {
    const size_t eq = rest.find("=\"");
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("a label without a value in '", rest, "'"));
    }
    names->emplace_back(rest.substr(0, eq));
    rest.remove_prefix(eq + 2);
    size_t i = 0;
    while (i < rest.size() && rest[i] != '"') i += rest[i] == '\\' ? 2 : 1;
    if (i >= rest.size()) return absl::InvalidArgumentError("a label value without its end quote");
    rest.remove_prefix(i + 1);
    absl::ConsumePrefix(&rest, ",");
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const MetricSpec& spec, absl::string_view series,
                         std::vector<std::string> names) {
  if (absl::EndsWith(series, "_bucket") && !names.empty() && names.back() == "le") {
    names.pop_back();
  }
  absl::string_view want = spec.labels;
  const bool open = absl::ConsumeSuffix(&want, kOpenLabels);
  const std::vector<std::string> wanted =
      want.empty() ? std::vector<std::string>{} : absl::StrSplit(want, ',');
  // Samples a prometheus::Registry collects carry their labels sorted by name: the order is not
  // the table's to say.
  std::vector<std::string> carried = names;
  std::vector<std::string> sorted_wanted = wanted;
  std::sort(carried.begin(), carried.end());
  std::sort(sorted_wanted.begin(), sorted_wanted.end());
  const bool ok = open ? std::includes(carried.begin(), carried.end(), sorted_wanted.begin(),
                                       sorted_wanted.end())
                       : carried == sorted_wanted;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("metric ", series, " carries the labels {",
                                                 absl::StrJoin(names, ","),
                                                 "}, the table's row says {", spec.labels, "}"));
}

}  // namespace

absl::Span<const MetricSpec> MetricTable() { return kRows; }

const MetricSpec* FindMetric(absl::string_view name, bool series) {
  for (const MetricSpec& spec : kRows) {
    if (spec.name == name) return &spec;
  }
  if (!series) return nullptr;
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    absl::string_view base = name;
    if (!absl::ConsumeSuffix(&base, suffix)) continue;
    const MetricSpec* spec = FindMetric(base);
    if (spec != nullptr && spec->type == MetricType::kHistogram) return spec;
  }
  return nullptr;
}

absl::Status CheckScrapeAgainstTable(absl::string_view scrape) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n', absl::SkipWhitespace())) {
    absl::string_view rest = line;
    const bool help = absl::ConsumePrefix(&rest, "# HELP ");
    const bool type = !help && absl::ConsumePrefix(&rest, "# TYPE ");
    if (!help && !type && absl::StartsWith(rest, "#")) continue;
    const size_t end = rest.find_first_of(" {");
    const absl::string_view name = rest.substr(0, end);
    if (absl::StartsWith(name, "exposer_")) continue;  // prometheus-cpp's, about its endpoint.
    rest.remove_prefix(end == absl::string_view::npos ? rest.size() : end);
    const MetricSpec* spec = FindMetric(name, /*series=*/!help && !type);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric ", name, " is served but is no row of common/metrics/metric_table.h"));
    }
    if (help && absl::StripPrefix(rest, " ") != EscapedHelp(spec->help)) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, "'s HELP is '",
                                                     absl::StripPrefix(rest, " "),
                                                     "', the table's '", spec->help, "'"));
    }
    if (type && absl::StripPrefix(rest, " ") != TypeName(spec->type)) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, " is served as a ",
                                                     absl::StripPrefix(rest, " "),
                                                     ", the table says ", TypeName(spec->type)));
    }
    if (help || type) continue;
    std::vector<std::string> names;
    if (absl::Status s = SampleLabelNames(rest, &names); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": ", s.message()));
    }
    if (absl::Status s = CheckLabels(*spec, name, std::move(names)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace convoy
