#include "bench/agent/line_plot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "simulator_bridge/png.h"

namespace convoy {
namespace {

constexpr int kGlyphWidth = 3;
constexpr int kGlyphHeight = 5;
constexpr int kLeftMargin = 70;
constexpr int kRightMargin = 20;
constexpr int kTopMargin = 50;
constexpr int kBottomMargin = 90;
constexpr int kTickLength = 6;
constexpr int kTargetTicks = 6;
constexpr double kDashPixels = 8;
constexpr Rgb kWhite = {255, 255, 255};
constexpr Rgb kBlack = {0, 0, 0};
constexpr Rgb kGrid = {225, 225, 225};

// Rows top to bottom, '1' = ink.
const std::map<char, std::array<const char*, kGlyphHeight>>& Font() {
  static const auto* font = new std::map<char, std::array<const char*, kGlyphHeight>>{
      {'0', {"111", "101", "101", "101", "111"}}, {'1', {"010", "110", "010", "010", "111"}},
      {'2', {"111", "001", "111", "100", "111"}}, {'3', {"111", "001", "111", "001", "111"}},
      {'4', {"101", "101", "111", "001", "001"}}, {'5', {"111", "100", "111", "001", "111"}},
      {'6', {"111", "100", "111", "101", "111"}}, {'7', {"111", "001", "001", "001", "001"}},
      {'8', {"111", "101", "111", "101", "111"}}, {'9', {"111", "101", "111", "001", "111"}},
      {'-', {"000", "000", "111", "000", "000"}}, {'.', {"000", "000", "000", "000", "010"}},
      {' ', {"000", "000", "000", "000", "000"}}, {'/', {"001", "001", "010", "100", "100"}},
      {'A', {"010", "101", "111", "101", "101"}}, {'B', {"110", "101", "110", "101", "110"}},
      {'C', {"011", "100", "100", "100", "011"}}, {'D', {"110", "101", "101", "101", "110"}},
      {'E', {"111", "100", "110", "100", "111"}}, {'F', {"111", "100", "110", "100", "100"}},
      {'G', {"011", "100", "101", "101", "011"}}, {'H', {"101", "101", "111", "101", "101"}},
      {'I', {"111", "010", "010", "010", "111"}}, {'K', {"101", "101", "110", "101", "101"}},
      {'L', {"100", "100", "100", "100", "111"}}, {'M', {"101", "111", "111", "101", "101"}},
      {'N', {"111", "101", "101", "101", "101"}}, {'O', {"010", "101", "101", "101", "010"}},
      {'P', {"110", "101", "110", "100", "100"}}, {'R', {"110", "101", "110", "101", "101"}},
      {'S', {"011", "100", "010", "001", "110"}}, {'T', {"111", "010", "010", "010", "010"}},
      {'U', {"101", "101", "101", "101", "111"}}, {'V', {"101", "101", "101", "101", "010"}},
      {'W', {"101", "101", "111", "111", "101"}}, {'Y', {"101", "101", "010", "010", "010"}},
  };
  return *font;
}

class Canvas {
 public:
  Canvas(int width, int height) : width_(width), height_(height), rgb_(3 * width * height, 255) {}

  void Put(int x, int y, const Rgb& c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    std::copy(c.begin(), c.end(), &rgb_[3 * (static_cast<size_t>(y) * width_ + x)]);
  }
  void Fill(int x0, int y0, int x1, int y1, const Rgb& c) {
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) Put(x, y, c);
    }
  }
  // A line `thickness` pixels wide; dashed lines alternate kDashPixels of ink and gap. `phase`
  // carries the dash pattern across the segments of one polyline.
  void Line(double x0, double y0, double x1, double y1, int thickness, const Rgb& c, bool dashed,
            double* phase) {
    const double length = std::hypot(x1 - x0, y1 - y0);
    const int steps = std::max(1, static_cast<int>(std::ceil(length * 2)));
    const int r0 = -(thickness - 1) / 2, r1 = thickness / 2;
    for (int i = 0; i <= steps; ++i) {
      const double t = static_cast<double>(i) / steps;
      const double along = *phase + t * length;
      if (dashed && static_cast<int64_t>(along / kDashPixels) % 2 == 1) continue;
      const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0)));
      const int y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
      for (int dy = r0; dy <= r1; ++dy) {
        for (int dx = r0; dx <= r1; ++dx) Put(x + dx, y + dy, c);
      }
    }
    *phase += length;
  }
  // Text with its top-left corner at (x, y); unknown characters are blank.
  void Text(int x, int y, const std::string& text, int scale, const Rgb& c) {
    for (char ch : text) {
      auto it = Font().find(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
      if (it != Font().end()) {
        for (int row = 0; row < kGlyphHeight; ++row) {
          for (int col = 0; col < kGlyphWidth; ++col) {
            if (it->second[row][col] == '1') {
              Fill(x + col * scale, y + row * scale, x + (col + 1) * scale - 1,
                   y + (row + 1) * scale - 1, c);
            }
          }
        }
      }
      x += (kGlyphWidth + 1) * scale;
    }
  }
  static int TextWidth(const std::string& text, int scale) {
    return text.empty() ? 0 : static_cast<int>(text.size()) * (kGlyphWidth + 1) * scale - scale;
  }

  int width() const { return width_; }
  int height() const { return height_; }
  const uint8_t* data() const { return rgb_.data(); }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

// A tick step of 1, 2 or 5 times a power of ten giving about kTargetTicks intervals over `span`.
double NiceStep(double span) {
  const double raw = span / kTargetTicks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

struct Axis {
  double lo, hi, step;
  static Axis Fit(double lo, double hi) {
    if (!(hi > lo)) hi = lo + 1;
    const double step = NiceStep(hi - lo);
    return Axis{std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
  }
};

void DrawPanel(Canvas& canvas, int left, const PlotPanel& panel, const PlotOptions& o) {
  double x_lo = 1e300, x_hi = -1e300, y_lo = 0, y_hi = -1e300;
  for (const PlotSeries& s : panel.series) {
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  if (x_lo > x_hi) x_lo = 0, x_hi = 1;
  if (y_lo > y_hi) y_hi = 1;
  x_lo = std::min(x_lo, 0.0);
  const Axis ax = Axis::Fit(x_lo, x_hi), ay = Axis::Fit(y_lo, y_hi);
  const int s = o.font_scale;
  const int x0 = left + kLeftMargin, x1 = left + o.panel_width - kRightMargin;
  const int y0 = o.panel_height - kBottomMargin,
            y1 = kTopMargin;  // Pixel rows of y = lo and y = hi.
  auto px = [&](double x) { return x0 + (x - ax.lo) / (ax.hi - ax.lo) * (x1 - x0); };
  auto py = [&](double y) { return y0 - (y - ay.lo) / (ay.hi - ay.lo) * (y0 - y1); };

  canvas.Text(left + kLeftMargin, 12, panel.title, s, kBlack);
  double no_phase = 0;
  for (double v = ay.lo; v <= ay.hi + ay.step / 2; v += ay.step) {
    const double y = py(v);
    canvas.Line(x0, y, x1, y, 1, kGrid, false, &no_phase);
    canvas.Line(x0 - kTickLength, y, x0, y, 2, kBlack, false, &no_phase);
    const std::string label = ShortNumber(v);
    canvas.Text(x0 - kTickLength - 4 - Canvas::TextWidth(label, s),
                static_cast<int>(y) - kGlyphHeight * s / 2, label, s, kBlack);
  }
  for (double v = ax.lo; v <= ax.hi + ax.step / 2; v += ax.step) {
    const double x = px(v);
    canvas.Line(x, y1, x, y0, 1, kGrid, false, &no_phase);
    canvas.Line(x, y0, x, y0 + kTickLength, 2, kBlack, false, &no_phase);
    const std::string label = ShortNumber(v);
    canvas.Text(static_cast<int>(x) - Canvas::TextWidth(label, s) / 2, y0 + kTickLength + 4, label,
                s, kBlack);
  }
  canvas.Line(x0, y0, x1, y0, 2, kBlack, false, &no_phase);
  canvas.Line(x0, y0, x0, y1, 2, kBlack, false, &no_phase);
  canvas.Text((x0 + x1 - Canvas::TextWidth(panel.x_label, s)) / 2,
              y0 + kTickLength + 14 + kGlyphHeight * s, panel.x_label, s, kBlack);
  canvas.Text(left + 8, y1 - kGlyphHeight * s - 8, panel.y_label, s, kBlack);

  for (const PlotSeries& series : panel.series) {
    double phase = 0;
    for (size_t i = 1; i < series.points.size(); ++i) {
      canvas.Line(px(series.points[i - 1].first), py(series.points[i - 1].second),
                  px(series.points[i].first), py(series.points[i].second), 3, series.color,
                  series.dashed, &phase);
    }
    for (const auto& [x, y] : series.points) {
      if (series.dashed) continue;
      canvas.Fill(static_cast<int>(px(x)) - 3, static_cast<int>(py(y)) - 3,
                  static_cast<int>(px(x)) + 3, static_cast<int>(py(y)) + 3, series.color);
    }
  }

  // Legend: one row under the x label, series in order.
  int lx = x0;
  const int ly = o.panel_height - 2 * kGlyphHeight * s - 6;
  for (const PlotSeries& series : panel.series) {
    double phase = 0;
    if (series.dashed) {
      canvas.Line(lx, ly + kGlyphHeight * s / 2, lx + 24, ly + kGlyphHeight * s / 2, 3,
                  series.color, true, &phase);
    } else {
      canvas.Fill(lx, ly, lx + 23, ly + kGlyphHeight * s - 1, series.color);
    }
    canvas.Text(lx + 30, ly, series.label, s, kBlack);
    lx += 30 + Canvas::TextWidth(series.label, s) + 24;
  }
}

}  // namespace

std::string ShortNumber(double value) {
  const double a = std::fabs(value);
  auto trim = [](std::string text) {
    if (text.find('.') != std::string::npos) {
      while (text.back() == '0') text.pop_back();
      if (text.back() == '.') text.pop_back();
    }
    return text;
  };
  if (a >= 1e6) return trim(absl::StrFormat("%.1f", value / 1e6)) + "M";
  if (a >= 1e3) return trim(absl::StrFormat("%.1f", value / 1e3)) + "K";
  if (a < 1e-9) return "0";
  return trim(absl::StrFormat("%.2f", value));
}

absl::Status WriteLinePlot(const std::string& path, const std::vector<PlotPanel>& panels,
                           const PlotOptions& options) {
  Canvas canvas(options.panel_width * std::max<int>(1, panels.size()), options.panel_height);
  canvas.Fill(0, 0, canvas.width() - 1, canvas.height() - 1, kWhite);
  for (size_t i = 0; i < panels.size(); ++i) {
    DrawPanel(canvas, static_cast<int>(i) * options.panel_width, panels[i], options);
  }
  return WritePng(path, canvas.data(), canvas.width(), canvas.height(), PixelOrder::kRgb);
}

}  // namespace convoy
