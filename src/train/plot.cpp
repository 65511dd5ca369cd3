// The loss curve as a self-contained SVG: train loss per step (light) with a moving average (dark),
// validation loss as points, labelled axes. No plotting library needed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "edgetrain/trainer.h"

namespace edgetrain {

void write_loss_svg(const std::string& path, const std::vector<std::pair<int64_t, double>>& train,
                    const std::vector<std::pair<int64_t, double>>& val, const std::string& title) {
  const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 50;
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const auto* s : {&train, &val})
    for (auto [x, y] : *s) {
      if (!std::isfinite(y)) continue;
      x1 = std::max(x1, static_cast<double>(x));
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  if (!std::isfinite(y0)) y0 = 0, y1 = 1;
  if (y1 - y0 < 1e-6) y1 = y0 + 1;
  y0 = std::max(0.0, y0 - 0.05 * (y1 - y0));
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' font-family='sans-serif' font-size='12'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>" << title << "</text>\n";
  for (int i = 0; i <= 5; ++i) {  // grid and ticks
    double y = y0 + (y1 - y0) * i / 5, x = x0 + (x1 - x0) * i / 5;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", y);
    o << "<line x1='" << L << "' x2='" << W - R << "' y1='" << py(y) << "' y2='" << py(y) << "' stroke='#eee'/>\n";
    o << "<text x='" << L - 6 << "' y='" << py(y) + 4 << "' text-anchor='end'>" << buf << "</text>\n";
    o << "<text x='" << px(x) << "' y='" << H - B + 18 << "' text-anchor='middle'>" << static_cast<int64_t>(std::llround(x)) << "</text>\n";
  }
  o << "<line x1='" << L << "' x2='" << L << "' y1='" << T << "' y2='" << H - B << "' stroke='black'/>\n";
  o << "<line x1='" << L << "' x2='" << W - R << "' y1='" << H - B << "' y2='" << H - B << "' stroke='black'/>\n";
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>step</text>\n";
  o << "<text transform='translate(18," << (T + H - B) / 2 << ") rotate(-90)' text-anchor='middle'>loss (nats/token)</text>\n";
  auto polyline = [&](const std::vector<std::pair<int64_t, double>>& s, const char* style) {
    o << "<polyline fill='none' " << style << " points='";
    for (auto [x, y] : s)
      if (std::isfinite(y)) o << px(static_cast<double>(x)) << "," << py(y) << " ";
    o << "'/>\n";
  };
  polyline(train, "stroke='#9ecae1' stroke-width='1'");
  std::vector<std::pair<int64_t, double>> avg;
  double ema = NAN;
  for (auto [x, y] : train)
    if (std::isfinite(y)) avg.push_back({x, ema = std::isnan(ema) ? y : 0.9 * ema + 0.1 * y});
  polyline(avg, "stroke='#08519c' stroke-width='2'");
  polyline(val, "stroke='#e6550d' stroke-width='2' stroke-dasharray='4,3'");
  for (auto [x, y] : val)
    if (std::isfinite(y)) o << "<circle cx='" << px(static_cast<double>(x)) << "' cy='" << py(y) << "' r='3.5' fill='#e6550d'/>\n";
  o << "<text x='" << W - R - 190 << "' y='" << T + 16 << "' fill='#08519c'>train (moving average)</text>\n";
  o << "<text x='" << W - R - 190 << "' y='" << T + 32 << "' fill='#e6550d'>validation</text>\n";
  o << "</svg>\n";
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << o.str();
    ET_CHECK_KIND(ErrorKind::io, f.good(), "cannot write '", tmp, "'");
  }
  ET_CHECK_KIND(ErrorKind::io, std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '", tmp, "' to '", path,
                "'");
}

}  // namespace edgetrain
