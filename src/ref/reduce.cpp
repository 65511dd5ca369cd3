// Reference of the reduction family: sum and mean over adjacent dims, and softmax, log_softmax, their
// backward and the causal (masked, scaled) softmax of attention, all along the last dim.
// Sums accumulate in double so the reference is closer to the exact value than any fp32 backend.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/reduce_geometry.h"
#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

// sum/mean: ints = {keepdim, dims...}; the dims are adjacent, so x is viewed as [outer, reduced, inner]
// and out as [outer, inner]. Returns the sums; the caller divides for mean.
void reduce_dims(const Call& c, bool mean) {
  const View& x = c.in[0];
  const ReduceGeometry geo = reduce_geometry(x.shape, c.ints);
  const int64_t outer = geo.outer, reduced = geo.reduced, inner = geo.inner;
  const float* xp = x.as<float>();
  float* o = c.out[0].as<float>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      double s = 0.0;
      for (int64_t k = 0; k < reduced; ++k) s += xp[(a * reduced + k) * inner + b];
      // mean over an empty set is 0/0 = NaN, as in PyTorch
      o[a * inner + b] = static_cast<float>(mean ? s / static_cast<double>(reduced) : s);
    }
}

}  // namespace

// See ref.h.
void softmax_row(const float* x, float* y, int64_t n, double scale) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, scale * x[j]);
  double z = 0.0;
  for (int64_t j = 0; j < n; ++j) z += std::exp(scale * x[j] - m);
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(std::exp(scale * x[j] - m) / z);
}

// x [..., dims..., ...] -> out with the (adjacent) reduced dims removed, or kept as 1 when keepdim:
// out[a, b] = sum_k x[a, k, b].
void sum(const Call& c) { reduce_dims(c, false); }

// As sum, divided by the number of reduced elements: out[a, b] = (1/K) sum_k x[a, k, b].
void mean(const Call& c) { reduce_dims(c, true); }

// x [..., n] -> out [..., n]: out = exp(x - max) / sum exp(x - max) along the last dim.
void softmax(const Call& c) {
  int64_t n = c.in[0].shape.last(), rows = n ? c.in[0].numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) softmax_row(c.in[0].as<float>() + r * n, c.out[0].as<float>() + r * n, n, 1.0);
}

// x [..., n] -> out [..., n]: out = x - max - log(sum exp(x - max)) along the last dim
// (-inf entries stay -inf; an all -inf row gives NaN).
void log_softmax(const Call& c) {
  int64_t n = c.in[0].shape.last(), rows = n ? c.in[0].numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = c.in[0].as<float>() + r * n;
    float* y = c.out[0].as<float>() + r * n;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(x[j]));
    double z = 0.0;
    for (int64_t j = 0; j < n; ++j) z += std::exp(x[j] - m);
    double lse = m + std::log(z);
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(x[j] - lse);
  }
}

// y = softmax output, dy its gradient, both [..., n] -> dx [..., n]: dx = y * (dy - sum_j y_j dy_j)
// along the last dim.
void softmax_backward(const Call& c) {
  int64_t n = c.in[0].shape.last(), rows = n ? c.in[0].numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *y = c.in[0].as<float>() + r * n, *dy = c.in[1].as<float>() + r * n;
    float* dx = c.out[0].as<float>() + r * n;
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(y[j]) * dy[j];
    for (int64_t j = 0; j < n; ++j) dx[j] = static_cast<float>(y[j] * (dy[j] - dot));
  }
}

// x [..., T, S] with S >= T (S - T earlier positions from a KV cache) -> out [..., T, S]:
// row t attends to columns j <= t + (S - T); out[t, j] = softmax_j(scale * x[t, j]) over those columns,
// and exactly 0 at the masked ones. Its backward is scale * softmax_backward(out, dout): the masked
// entries have out = 0 and so get no gradient (the model applies the scale itself).
void causal_softmax(const Call& c) {
  const View& x = c.in[0];
  int64_t S = x.shape.dim(-1), T = x.shape.dim(-2), mats = x.numel() / std::max<int64_t>(S * T, 1);
  double scale = c.floats[0];
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x.as<float>() + (b * T + t) * S;
      float* yr = c.out[0].as<float>() + (b * T + t) * S;
      int64_t visible = t + (S - T) + 1;
      softmax_row(xr, yr, visible, scale);
      for (int64_t j = visible; j < S; ++j) yr[j] = 0.0f;
    }
}

}  // namespace edgetrain::ref
