// Reference of the Llama-block family: RMSNorm, rotary position embedding, SwiGLU's silu_mul, token
// embedding and gather, each forward with its backward. Row sums and angles are computed in double.
#include <cmath>
#include <limits>

#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

// Rotates every pair (2i, 2i+1) of x [B, T, H, D] or [T, H, D] at position p = t + pos_offset (with pos:
// pos[b, t] + pos_offset) by sign * p * f_i, f_i = freqs[i] when given, else theta^(-2i/D):
// y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos.
void rotate(const Call& c, double sign) {
  const float* freqs = c.has_in(1) ? c.in[1].as<float>() : nullptr;
  const int32_t* pos = c.has_in(2) ? c.in[2].as<int32_t>() : nullptr;
  const View& x = c.in[0];
  const Shape& s = x.shape;
  int r = s.rank();
  int64_t B = r == 4 ? s[0] : 1, T = s[r - 3], H = s[r - 2], D = s[r - 1];
  double theta = c.floats[0], pos_offset = c.floats[1];
  const float* xp = x.as<float>();
  float* yp = c.out[0].as<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      double p = static_cast<double>(pos ? pos[b * T + t] : t) + pos_offset;
      for (int64_t h = 0; h < H; ++h) {
        int64_t base = ((b * T + t) * H + h) * D;
        for (int64_t i = 0; i < D / 2; ++i) {
          const double f = freqs ? static_cast<double>(freqs[i])
                                 : std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
          double angle = sign * p * f;
          double cs = std::cos(angle), sn = std::sin(angle);
          double x0 = xp[base + 2 * i], x1 = xp[base + 2 * i + 1];
          yp[base + 2 * i] = static_cast<float>(x0 * cs - x1 * sn);
          yp[base + 2 * i + 1] = static_cast<float>(x0 * sn + x1 * cs);
        }
      }
    }
}

}  // namespace

// x [..., D], w [D] -> y [..., D], rstd [rows] (rows = numel / D):
// rstd[m] = 1/sqrt(mean_k x[m,k]^2 + eps), y[m,k] = x[m,k] * rstd[m] * w[k].
void rms_norm(const Call& c) {
  const View& x = c.in[0];
  int64_t D = x.shape.last(), rows = x.shape.rows();
  const float *xp = x.as<float>(), *w = c.in[1].as<float>();
  float *y = c.out[0].as<float>(), *rstd = c.out[1].as<float>();
  double eps = c.floats[0];
  for (int64_t m = 0; m < rows; ++m) {
    const float* xr = xp + m * D;
    double ss = 0.0;
    for (int64_t k = 0; k < D; ++k) ss += static_cast<double>(xr[k]) * xr[k];
    double rs = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
    rstd[m] = static_cast<float>(rs);
    for (int64_t k = 0; k < D; ++k) y[m * D + k] = static_cast<float>(xr[k] * rs * w[k]);
  }
}

// dy, x [..., D], w [D], rstd [rows] (from rms_norm) -> dx [..., D], dw [D]; ints {accumulate, dw?}.
// With r = rstd[m], xh = x*r and g = dy*w: dx[m,k] = r * (g[k] - xh[k] * (1/D) sum_j g[j]*xh[j]);
// dw[k] (+)= sum_m dy[m,k] * xh[m,k] (accumulate = 1 adds to dw, 0 overwrites it); with dw = 0 (a frozen w:
// nothing would read it) dw is left as it is.
void rms_norm_backward(const Call& c) {
  const View& x = c.in[1];
  int64_t D = x.shape.last(), rows = x.shape.rows();
  const float *dy = c.in[0].as<float>(), *xp = x.as<float>(), *w = c.in[2].as<float>(),
              *rstd = c.in[3].as<float>();
  float *dx = c.out[0].as<float>(), *dw = c.out[1].as<float>();
  for (int64_t m = 0; m < rows; ++m) {
    double r = rstd[m], dot = 0.0;
    for (int64_t k = 0; k < D; ++k) dot += static_cast<double>(dy[m * D + k]) * w[k] * (xp[m * D + k] * r);
    dot /= static_cast<double>(D);
    for (int64_t k = 0; k < D; ++k) {
      double g = static_cast<double>(dy[m * D + k]) * w[k], xh = xp[m * D + k] * r;
      dx[m * D + k] = static_cast<float>(r * (g - xh * dot));
    }
  }
  if (c.ints.size() > 1 && c.ints[1] == 0) return;
  for (int64_t k = 0; k < D; ++k) {
    double s = 0.0;
    for (int64_t m = 0; m < rows; ++m) s += static_cast<double>(dy[m * D + k]) * xp[m * D + k] * rstd[m];
    dw[k] = static_cast<float>(c.ints[0] ? dw[k] + s : s);
  }
}

// x [B, T, H, D] or [T, H, D], D even, freqs [D/2] and pos [B, T] (or [T]) i32 optional -> y, same shape;
// floats {theta, pos_offset}: with p = t + pos_offset (pos given: pos[b, t] + pos_offset, packed samples)
// and a = p * f_i (in double; f_i = freqs[i] if given, else theta^(-2i/D)),
// pair i = (x[2i], x[2i+1]) becomes (x0 cos a - x1 sin a, x0 sin a + x1 cos a).
void rope(const Call& c) { rotate(c, 1.0); }

// dy -> dx, shapes as rope: the transpose of rope's rotation, i.e. the same pairs rotated by -a.
void rope_backward(const Call& c) { rotate(c, -1.0); }

// g, u -> h, all one shape: h = silu(g) * u = g * sigmoid(g) * u.
void silu_mul(const Call& c) {
  const float *g = c.in[0].as<float>(), *u = c.in[1].as<float>();
  float* h = c.out[0].as<float>();
  for (int64_t i = 0; i < c.out[0].numel(); ++i) h[i] = static_cast<float>(g[i] * sigmoid(g[i]) * u[i]);
}

// dh, g, u -> dg, du, all one shape: with s = sigmoid(g),
// dg = dh * u * s * (1 + g * (1 - s)), du = dh * g * s.
void silu_mul_backward(const Call& c) {
  const float *dh = c.in[0].as<float>(), *g = c.in[1].as<float>(), *u = c.in[2].as<float>();
  float *dg = c.out[0].as<float>(), *du = c.out[1].as<float>();
  for (int64_t i = 0; i < c.out[0].numel(); ++i) {
    double s = sigmoid(g[i]);
    dg[i] = static_cast<float>(static_cast<double>(dh[i]) * u[i] * s * (1.0 + g[i] * (1.0 - s)));
    du[i] = static_cast<float>(static_cast<double>(dh[i]) * g[i] * s);
  }
}

// w [Vp, D] f32, idx [...] i32, ints {first?, total?} (default 0, Vp) -> out [..., D]. w holds rows
// first .. first+Vp-1 of a table of `total` rows: out[i, :] = w[idx[i] - first, :] for an index of this part;
// an index outside [0, total) gives a row of NaN, so a bad token id is loud downstream instead of reading out
// of bounds; an index of another part leaves out[i, :] unchanged (that part's call writes it).
void embedding(const Call& c) {
  const View& w = c.in[0];
  const int64_t Vp = w.shape[0], D = w.shape[1], n = c.in[1].numel();
  const int64_t first = c.ints.size() > 0 ? c.ints[0] : 0, total = c.ints.size() > 1 ? c.ints[1] : Vp;
  const int32_t* idx = c.in[1].as<int32_t>();
  float* o = c.out[0].as<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = idx[i];
    if (v < 0 || v >= total)
      for (int64_t d = 0; d < D; ++d) o[i * D + d] = kNaN;
    else if (v >= first && v < first + Vp)
      for (int64_t d = 0; d < D; ++d) o[i * D + d] = w.as<float>()[(v - first) * D + d];
  }
}

// dout [..., D], idx [...] i32 -> dw [Vp, D] (the caller's tensor); ints {accumulate, first?} (default 0):
// dw holds rows first .. first+Vp-1 of the table. dw is zeroed first unless accumulate = 1, then
// dw[idx[i] - first, :] += dout[i, :]; repeated indices add up (in order of i) and indices outside
// [first, first + Vp) contribute nothing.
void embedding_backward(const Call& c) {
  const View& dw = c.out[0];
  const int64_t Vp = dw.shape[0], D = dw.shape[1], n = c.in[1].numel();
  const int64_t first = c.ints.size() > 1 ? c.ints[1] : 0;
  const float* dout = c.in[0].as<float>();
  const int32_t* idx = c.in[1].as<int32_t>();
  float* w = dw.as<float>();
  if (!c.ints[0])
    for (int64_t i = 0; i < Vp * D; ++i) w[i] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(idx[i]) - first;
    if (v < 0 || v >= Vp) continue;
    for (int64_t d = 0; d < D; ++d) w[v * D + d] += dout[i * D + d];
  }
}

// x f32 of rank r, index i32 of rank r (index.shape[k] <= x.shape[k] for k != dim); ints {dim}
// -> out [index.shape]: out[i] = x[i with coordinate dim replaced by index[i]]; an index outside
// [0, x.shape[dim]) gives NaN.
void gather(const Call& c) {
  const View &x = c.in[0], &index = c.in[1];
  int r = x.shape.rank();
  int dim = static_cast<int>(c.ints[0] < 0 ? c.ints[0] + r : c.ints[0]);
  int64_t xs[kMaxRank], idx[kMaxRank];
  strides_of(x.shape, xs);
  const int32_t* ip = index.as<int32_t>();
  float* o = c.out[0].as<float>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    unravel(index.shape, i, idx);
    int64_t v = ip[i];
    if (v < 0 || v >= x.shape[dim]) {
      o[i] = kNaN;
      continue;
    }
    idx[dim] = v;
    int64_t off = 0;
    for (int k = 0; k < r; ++k) off += idx[k] * xs[k];
    o[i] = x.as<float>()[off];
  }
}

}  // namespace edgetrain::ref
