// WeightError (edgetrain/interop.h): the measured error of quantized weights, reported by imports into a
// 4-bit mode (q4gsw against the file's weights) and by GGUF exports that quantize (the written blocks,
// decoded, against the model's weights).
#include <cmath>
#include <cstdio>

#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain {

void WeightError::add(const std::string& name, const float* quantized, const float* reference, size_t n) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(quantized[i]) - reference[i];
    err += d * d;
    ref += static_cast<double>(reference[i]) * reference[i];
  }
  tensors.push_back({name, ref > 0 ? std::sqrt(err / ref) : (err > 0 ? INFINITY : 0.0)});
  sq_err += err;
  sq_ref += ref;
}

double WeightError::overall() const {
  return sq_ref > 0 ? std::sqrt(sq_err / sq_ref) : (sq_err > 0 ? INFINITY : 0.0);
}

const WeightError::Entry* WeightError::worst() const {
  const Entry* w = nullptr;
  for (const Entry& e : tensors)
    if (!w || e.rel_rms > w->rel_rms) w = &e;
  return w;
}

std::string WeightError::summary() const {
  if (tensors.empty()) return "no tensors measured";
  double lo = tensors[0].rel_rms, hi = lo;
  for (const Entry& e : tensors) lo = std::min(lo, e.rel_rms), hi = std::max(hi, e.rel_rms);
  char buf[200];
  std::snprintf(buf, sizeof buf, "relative RMS weight error %.3g%% over %zu tensor%s (per tensor %.3g%% to %.3g%%)",
                100 * overall(), tensors.size(), tensors.size() == 1 ? "" : "s", 100 * lo, 100 * hi);
  return buf;
}

std::string WeightError::worst_line() const {
  const Entry* w = worst();
  if (!w) return "worst: none";
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.3g%%", 100 * w->rel_rms);
  return "worst: " + w->name + buf;
}

WeightError interop_detail::q4_error(Model& model) {
  Backend& b = model.backend();
  WeightError e;
  for (Param& p : model.params()) {
    if (!p.quantized()) continue;
    const q4::Geometry g(p.value.shape()[0], p.value.shape()[1], model.config().group_size);
    const auto codes = q4::unpack_w4x8(g, b.to_vector<uint32_t>(p.codes).data());
    const auto scales = b.to_vector<float>(p.scales);
    const std::vector<float> q = q4::dequantize(g, codes.data(), scales.data());
    const std::vector<float> master = b.to_vector<float>(p.value);
    e.add(p.name, q.data(), master.data(), q.size());
  }
  return e;
}

}  // namespace edgetrain
