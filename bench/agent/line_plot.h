// LinePlot: side-by-side panels of polylines written as a PNG, for benchmark figures. No font
// library: tick labels, titles and legend text are drawn with a built-in 3x5 pixel font (digits,
// '.', '-' and capitals).
#ifndef CONVOY_BENCH_AGENT_LINE_PLOT_H_
#define CONVOY_BENCH_AGENT_LINE_PLOT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace convoy {

using Rgb = std::array<uint8_t, 3>;

struct PlotSeries {
  std::string label;  // Legend text (capitals, digits).
  Rgb color = {0, 0, 0};
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order.
};

struct PlotPanel {
  std::string title;    // Above the panel.
  std::string x_label;  // Below the x axis.
  std::string y_label;  // Above the y axis.
  std::vector<PlotSeries> series;
};

struct PlotOptions {
  int panel_width = 560;
  int panel_height = 400;
  int font_scale = 2;  // Pixels per font pixel.
};

// Draws the panels left to right, each with its own axes (ranges fit to its data, y including 0),
// tick marks with labels, and a legend of the series in order. Writes an RGB PNG to `path`. Errors:
// WritePng's.
absl::Status WriteLinePlot(const std::string& path, const std::vector<PlotPanel>& panels,
                           const PlotOptions& options = {});

// "12", "2.5", "40K", "1.2M": short tick labels for the 3x5 font.
std::string ShortNumber(double value);

}  // namespace convoy

#endif  // CONVOY_BENCH_AGENT_LINE_PLOT_H_
