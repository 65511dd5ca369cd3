// Fast CPU kernels for the row-wise and elementwise parts of a training step: fused cross-entropy (one-pass
// online softmax per row; and over a vocabulary in parts, logsumexp_rows + fused_ce_part), AdamW, the global
// gradient norm, RMSNorm, the softmax family, SwiGLU, RoPE and the embedding pair. Rows are spread over the
// worker pool; every reduction has a fixed order (lane sums, per-row or per-block partials summed in index
// order), so results do not depend on the thread count. Rows holding NaN or infinities take a slow path
// written like the reference, so the NaN rules are the reference's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "cpu/avx512.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {
namespace {

using simd::vf;
using simd::vi;
using simd::kLanes;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kBlock = 1024;  // floats per block of a row: small enough to stay in L1 between passes

// Rows per task so that a task touches at least ~16K floats.
int64_t row_grain(int64_t row_len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_len, 1)); }

bool any(vi m) {
  int32_t r = 0;
  for (int i = 0; i < kLanes; ++i) r |= m[i];
  return r != 0;
}

// sum_j a[j] * b[j] in float lanes per block, blocks added in double. b may be null (then a[j]^2).
double dot(const float* a, const float* b, int64_t n) {
  double total = 0.0;
  for (int64_t b0 = 0; b0 < n; b0 += 128) {
    const int64_t len = std::min<int64_t>(128, n - b0);
    const float *pa = a + b0, *pb = b ? b + b0 : pa;
    vf acc = {};
    int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes) acc += simd::load(pa + j) * simd::load(pb + j);
    float t = simd::hsum(acc);
    for (; j < len; ++j) t += pa[j] * pb[j];
    total += t;
  }
  return total;
}

// The maximum m of s*x[j] and l = sum_j exp(s*x[j] - m), in one pass over the row (blocks: max, then the
// exp sum while the block is in cache; l is rescaled when the maximum grows). False when the row holds a
// NaN or its maximum is not finite: the caller then follows the reference's slow path.
bool max_sumexp(const float* x, int64_t n, float s, float& m_out, double& l_out) {
  float m = -kInf;
  double l = 0.0;
  bool bad = false;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t len = std::min(kBlock, n - b0);
    const float* p = x + b0;
    vf mv = simd::splat(-kInf);
    vi nan = {};
    int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes) {
      vf v = simd::load(p + j) * s;
      nan |= v != v;
      mv = v > mv ? v : mv;
    }
    float bm = simd::hmax(mv);
    for (int64_t t = j; t < len; ++t) {
      float v = p[t] * s;
      bad |= v != v;
      bm = v > bm ? v : bm;
    }
    bad |= any(nan);
    if (bm > m) {
      l *= std::exp(static_cast<double>(m) - bm);
      m = bm;
    }
    if (bad || !std::isfinite(m)) return false;
    const vf mm = simd::splat(m);
    vf acc = {};
    for (j = 0; j + kLanes <= len; j += kLanes) acc += simd::exp(simd::load(p + j) * s - mm);
    float t = simd::hsum(acc);
    for (; j < len; ++j) t += simd::exp1(p[j] * s - m);
    l += t;
  }
  if (!std::isfinite(m)) return false;
  m_out = m;
  l_out = l;
  return true;
}

// ---- fused cross-entropy ----

// The reference's row, in double: used for rows with NaN or infinite logits.
double ce_row_slow(const float* row, float* drow, int64_t V, int32_t y, double n_valid) {
  double mx = row[0];
  for (int64_t j = 1; j < V; ++j) mx = std::fmax(mx, static_cast<double>(row[j]));
  double z = 0.0;
  for (int64_t j = 0; j < V; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
  const double lse = mx + std::log(z), xy = row[y];
  for (int64_t j = 0; j < V; ++j)
    drow[j] = static_cast<float>((std::exp(static_cast<double>(row[j]) - lse) - (j == y ? 1.0 : 0.0)) / n_valid);
  return (lse - xy) / n_valid;
}

// One row: writes dlogits (drow may be row itself) and returns the row's loss term.
double ce_row(const float* row, float* drow, int64_t V, int32_t y, double n_valid) {
  if (y < 0) {
    std::fill(drow, drow + V, 0.0f);
    return 0.0;
  }
  if (y >= V) {
    std::fill(drow, drow + V, kNaN);
    return std::numeric_limits<double>::quiet_NaN();
  }
  float m;
  double l;
  if (!max_sumexp(row, V, 1.0f, m, l)) return ce_row_slow(row, drow, V, y, n_valid);
  const double lse = m + std::log(l), xy = row[y];
  const float scale = static_cast<float>(1.0 / (l * n_valid));
  const vf mm = simd::splat(m);
  int64_t j = 0;
  for (; j + kLanes <= V; j += kLanes) simd::store(drow + j, simd::exp(simd::load(row + j) - mm) * scale);
  for (; j < V; ++j) drow[j] = simd::exp1(row[j] - m) * scale;
  drow[y] = static_cast<float>((std::exp(xy - lse) - 1.0) / n_valid);
  return (lse - xy) / n_valid;
}

// Whether every value of x[0..n) is finite (x - x is NaN exactly for NaN and infinities).
bool all_finite(const float* x, int64_t n) {
  vi bad = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    vf v = simd::load(x + j);
    v = v - v;
    bad |= v != v;
  }
  bool b = any(bad);
  for (; j < n; ++j) b |= !std::isfinite(x[j]);
  return !b;
}

// One row of fused_ce_part (columns first .. first+Vp-1, the full row's lse given): writes dlogits (drow
// may be row itself) and returns the row's loss term.
double ce_part_row(const float* row, float* drow, int64_t Vp, int64_t first, int64_t total, int64_t y, double lse,
                   double n_valid) {
  if (y < 0) {
    std::fill(drow, drow + Vp, 0.0f);
    return 0.0;
  }
  if (y >= total) {
    std::fill(drow, drow + Vp, kNaN);
    return std::numeric_limits<double>::quiet_NaN();
  }
  const bool here = y >= first && y < first + Vp;
  const double xy = here ? static_cast<double>(row[y - first]) : 0.0;  // before drow overwrites it
  const double loss = ((first == 0 ? lse : 0.0) - xy) / n_valid;
  if (!std::isfinite(lse) || !all_finite(row, Vp)) {  // the reference's arithmetic
    for (int64_t j = 0; j < Vp; ++j)
      drow[j] = static_cast<float>((std::exp(static_cast<double>(row[j]) - lse) - (first + j == y ? 1.0 : 0.0)) / n_valid);
    return loss;
  }
  const float inv = static_cast<float>(1.0 / n_valid), l = static_cast<float>(lse);
  const vf ll = simd::splat(l);
  int64_t j = 0;
  for (; j + kLanes <= Vp; j += kLanes) simd::store(drow + j, simd::exp(simd::load(row + j) - ll) * inv);
  for (; j < Vp; ++j) drow[j] = simd::exp1(row[j] - l) * inv;
  if (here) drow[y - first] = static_cast<float>((std::exp(xy - lse) - 1.0) / n_valid);
  return loss;
}

// ---- softmax family ----

// The reference's softmax row in double (all -inf or NaN rows give NaN).
void softmax_row_slow(const float* x, float* y, int64_t n, double scale) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, scale * x[j]);
  double z = 0.0;
  for (int64_t j = 0; j < n; ++j) z += std::exp(scale * x[j] - m);
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(std::exp(scale * x[j] - m) / z);
}

// y = softmax(s * x) over n values.
void softmax_row(const float* x, float* y, int64_t n, float s) {
  float m;
  double l;
  if (!max_sumexp(x, n, s, m, l)) return softmax_row_slow(x, y, n, s);
  const float inv = static_cast<float>(1.0 / l);
  const vf mm = simd::splat(m);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) simd::store(y + j, simd::exp(simd::load(x + j) * s - mm) * inv);
  for (; j < n; ++j) y[j] = simd::exp1(x[j] * s - m) * inv;
}

void rows_of(const ref::Call& c, int64_t& n, int64_t& rows) {
  n = c.in[0].shape.last();
  rows = n ? c.in[0].numel() / n : 0;
}

// ---- RMSNorm backward: rows per partial of dw ----
constexpr int64_t kNormRows = 32;

}  // namespace

// logits [R, V], labels [R] i32, floats {n_valid}; loss [], dlogits [R, V] (may be the logits buffer).
// Per-row losses, then summed in row order: deterministic.
void fused_ce(const ref::Call& c) {
  const int64_t R = c.in[0].shape[0], V = c.in[0].shape[1];
  const float* x = c.in[0].as<float>();
  const int32_t* labels = c.in[1].as<int32_t>();
  float* d = c.out[1].as<float>();
  const double n_valid = c.floats[0];
  std::vector<double> row_loss(static_cast<size_t>(R));
  parallel_for(R, row_grain(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row_loss[r] = ce_row(x + r * V, d + r * V, V, labels[r], n_valid);
  });
  double loss = 0.0;
  for (int64_t r = 0; r < R; ++r) loss += row_loss[r];
  *c.out[0].as<float>() = static_cast<float>(loss);
}

// x [R, V], ints {accumulate} -> lse [R]: one-pass max and exp sum per row (the reference's double loops for
// rows with NaN or infinities), merged with the old lse in double as the reference does.
void logsumexp_rows(const ref::Call& c) {
  const int64_t R = c.in[0].shape[0], V = c.in[0].shape[1];
  const float* x = c.in[0].as<float>();
  float* lse = c.out[0].as<float>();
  const bool accumulate = c.ints[0] != 0;
  parallel_for(R, row_grain(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * V;
      float mf;
      double mx, z;
      if (max_sumexp(row, V, 1.0f, mf, z)) {
        mx = mf;
      } else {
        mx = row[0];
        for (int64_t j = 1; j < V; ++j) mx = std::fmax(mx, static_cast<double>(row[j]));
        z = 0.0;
        for (int64_t j = 0; j < V; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
      }
      double v = mx + std::log(z);
      if (accumulate) {
        const double old = lse[r];
        if (std::isnan(old)) v = old;
        else if (old != -std::numeric_limits<double>::infinity()) {
          const double m = std::fmax(mx, old);
          v = m + std::log(z * std::exp(mx - m) + std::exp(old - m));
        }
      }
      lse[r] = static_cast<float>(v);
    }
  });
}

// logits [R, Vp], labels, lse [R]; ints {first, total, accumulate}; floats {n_valid}; loss [], dlogits
// (may be the logits buffer). Per-row losses summed in row order after the old loss: deterministic.
void fused_ce_part(const ref::Call& c) {
  const int64_t R = c.in[0].shape[0], Vp = c.in[0].shape[1];
  const float* x = c.in[0].as<float>();
  const int32_t* labels = c.in[1].as<int32_t>();
  const float* lse = c.in[2].as<float>();
  const int64_t first = c.ints[0], total = c.ints[1];
  float* d = c.out[1].as<float>();
  const double n_valid = c.floats[0];
  std::vector<double> row_loss(static_cast<size_t>(R));
  parallel_for(R, row_grain(Vp), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      row_loss[r] = ce_part_row(x + r * Vp, d + r * Vp, Vp, first, total, labels[r], lse[r], n_valid);
  });
  double loss = c.ints[2] != 0 ? static_cast<double>(*c.out[0].as<float>()) : 0.0;
  for (int64_t r = 0; r < R; ++r) loss += row_loss[r];
  *c.out[0].as<float>() = static_cast<float>(loss);
}

AdamwArgs AdamwArgs::of(const ref::Call& c, size_t grad_scale_input) {
  AdamwArgs a;
  a.p = c.out[0].as<float>();
  a.m = c.out[1].as<float>();
  a.v = c.out[2].as<float>();
  a.g = c.out[3].as<float>();
  a.scaled = c.has_in(grad_scale_input);
  a.s = a.scaled ? c.in[grad_scale_input].as<float>()[0] : 1.0f;
  a.lr = c.floats[0], a.b1 = c.floats[1], a.b2 = c.floats[2], a.eps = c.floats[3], a.wd = c.floats[4];
  a.bc1 = c.floats[5], a.bc2 = c.floats[6];
  return a;
}

// The reference's fp32 operations in its order, so results are bit-identical.
void AdamwArgs::run(int64_t i0, int64_t i1) const {
  const float lrwd = lr * wd, c1 = 1.0f - b1, c2 = 1.0f - b2;
  int64_t i = i0;
  for (; i + kLanes <= i1; i += kLanes) {
    vf pv = simd::load(p + i), gv = simd::load(g + i);
    if (scaled) gv = gv * s;
    pv = pv - lrwd * pv;
    vf mv = b1 * simd::load(m + i) + c1 * gv;
    vf vv = b2 * simd::load(v + i) + c2 * gv * gv;
    pv = pv - lr * (mv / bc1) / (simd::sqrt(vv / bc2) + eps);
    simd::store(p + i, pv);
    simd::store(m + i, mv);
    simd::store(v + i, vv);
    simd::store(g + i, vf{});
  }
  for (; i < i1; ++i) {
    const float gi = scaled ? g[i] * s : g[i];
    float pi = p[i];
    pi = pi - lrwd * pi;
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    pi = pi - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    g[i] = 0.0f;
  }
}

// param, m, v, grad (scaled by grad_scale when given, then zeroed); floats {lr, beta1, beta2, eps, wd, bc1, bc2}.
void adamw_step(const ref::Call& c) {
  const AdamwArgs a = AdamwArgs::of(c, 4);
  parallel_for(c.in[0].numel(), 1 << 14, [&](int64_t i0, int64_t i1) { a.run(i0, i1); });
}

// norm [] = sqrt(sum of squares of every input): fixed 64K-element chunks, partials summed in order.
void grad_norm(const ref::Call& c) {
  constexpr int64_t kChunk = 1 << 16;
  struct Piece {
    const float* p;
    int64_t n;
  };
  std::vector<Piece> pieces;
  for (const ref::View& t : c.in)
    for (int64_t i = 0; i < t.numel(); i += kChunk) pieces.push_back({t.as<float>() + i, std::min(kChunk, t.numel() - i)});
  std::vector<double> part(pieces.size());
  parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) part[i] = dot(pieces[i].p, nullptr, pieces[i].n);
  });
  double acc = 0.0;
  for (double s : part) acc += s;
  *c.out[0].as<float>() = static_cast<float>(std::sqrt(acc));
}

// x [..., D], w [D] -> y, rstd[rows]: rstd = 1/sqrt(mean x^2 + eps), y = x*rstd*w.
void rms_norm(const ref::Call& c) {
  const int64_t D = c.in[0].shape.last(), rows = c.in[0].shape.rows();
  const float *xp = c.in[0].as<float>(), *w = c.in[1].as<float>();
  float *y = c.out[0].as<float>(), *rstd = c.out[1].as<float>();
  const double eps = c.floats[0];
  parallel_for(rows, row_grain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t m = r0; m < r1; ++m) {
      const float* xr = xp + m * D;
      const double rs = 1.0 / std::sqrt(dot(xr, nullptr, D) / static_cast<double>(D) + eps);
      rstd[m] = static_cast<float>(rs);
      const float r = static_cast<float>(rs);
      for (int64_t k = 0; k < D; ++k) y[m * D + k] = xr[k] * r * w[k];
    }
  });
}

// dy, x [..., D], w [D], rstd [rows] -> dx, dw [D]; ints {accumulate}. dx per row; dw from per-32-row
// partials (double) summed in block order.
void rms_norm_backward(const ref::Call& c) {
  const int64_t D = c.in[1].shape.last(), rows = c.in[1].shape.rows();
  const float *dy = c.in[0].as<float>(), *xp = c.in[1].as<float>(), *w = c.in[2].as<float>(),
              *rstd = c.in[3].as<float>();
  float *dx = c.out[0].as<float>(), *dw = c.out[1].as<float>();
  const int64_t blocks = (rows + kNormRows - 1) / kNormRows;
  std::vector<double> part(static_cast<size_t>(blocks * D));
  parallel_for(blocks, std::max<int64_t>(1, row_grain(D) / kNormRows), [&](int64_t b0, int64_t b1) {
    std::vector<float> g(static_cast<size_t>(D)), acc(static_cast<size_t>(D));
    for (int64_t blk = b0; blk < b1; ++blk) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t m = blk * kNormRows; m < std::min(rows, (blk + 1) * kNormRows); ++m) {
        const float *dyr = dy + m * D, *xr = xp + m * D;
        const float r = rstd[m];
        for (int64_t k = 0; k < D; ++k) g[k] = dyr[k] * w[k];
        const float d = static_cast<float>(dot(g.data(), xr, D) * r / static_cast<double>(D));
        for (int64_t k = 0; k < D; ++k) {
          const float xh = xr[k] * r;
          dx[m * D + k] = r * (g[k] - xh * d);
          acc[k] += dyr[k] * xh;
        }
      }
      std::copy(acc.begin(), acc.end(), part.begin() + blk * D);
    }
  });
  const bool accumulate = c.ints[0] != 0;
  for (int64_t k = 0; k < D; ++k) {
    double s = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) s += part[blk * D + k];
    dw[k] = static_cast<float>(accumulate ? dw[k] + s : s);
  }
}

void softmax(const ref::Call& c) {
  int64_t n, rows;
  rows_of(c, n, rows);
  const float* x = c.in[0].as<float>();
  float* y = c.out[0].as<float>();
  parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) softmax_row(x + r * n, y + r * n, n, 1.0f);
  });
}

// y = x - lse along the last dim.
void log_softmax(const ref::Call& c) {
  int64_t n, rows;
  rows_of(c, n, rows);
  const float* xp = c.in[0].as<float>();
  float* yp = c.out[0].as<float>();
  parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = xp + r * n;
      float* y = yp + r * n;
      float m;
      double l;
      if (max_sumexp(x, n, 1.0f, m, l)) {
        const float ll = static_cast<float>(std::log(l));
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - ll;
        continue;
      }
      double md = -std::numeric_limits<double>::infinity();  // the reference's path (NaN / inf rows)
      for (int64_t j = 0; j < n; ++j) md = std::max(md, static_cast<double>(x[j]));
      double z = 0.0;
      for (int64_t j = 0; j < n; ++j) z += std::exp(x[j] - md);
      const double lse = md + std::log(z);
      for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(x[j] - lse);
    }
  });
}

// dx = y * (dy - sum(y*dy)) along the last dim.
void softmax_backward(const ref::Call& c) {
  int64_t n, rows;
  rows_of(c, n, rows);
  const float *yp = c.in[0].as<float>(), *dyp = c.in[1].as<float>();
  float* dxp = c.out[0].as<float>();
  parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *y = yp + r * n, *dy = dyp + r * n;
      float* dx = dxp + r * n;
      const double d = dot(y, dy, n);
      for (int64_t j = 0; j < n; ++j) dx[j] = static_cast<float>(y[j] * (dy[j] - d));
    }
  });
}

// x [..., T, S]: row t = softmax(scale * x[t, j <= t + S - T]), masked entries 0.
void causal_softmax(const ref::Call& c) {
  const ref::View& x = c.in[0];
  const int64_t S = x.shape.dim(-1), T = x.shape.dim(-2), rows = S ? x.numel() / S : 0;
  const float scale = c.floats[0];
  const float* xp = x.as<float>();
  float* yp = c.out[0].as<float>();
  parallel_for(rows, row_grain(S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t visible = r % T + (S - T) + 1;
      softmax_row(xp + r * S, yp + r * S, visible, scale);
      std::fill(yp + r * S + visible, yp + (r + 1) * S, 0.0f);
    }
  });
}

// h = g * sigmoid(g) * u.
void silu_mul(const ref::Call& c) {
  const float *g = c.in[0].as<float>(), *u = c.in[1].as<float>();
  float* h = c.out[0].as<float>();
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512())
    return parallel_for(c.out[0].numel(), 1 << 14, [&](int64_t i0, int64_t i1) { avx512::silu_mul(g, u, h, i0, i1); });
#endif
  parallel_for(c.out[0].numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kLanes <= i1; i += kLanes) {
      vf gv = simd::load(g + i);
      vf s = 1.0f / (1.0f + simd::exp(-gv));
      simd::store(h + i, gv * s * simd::load(u + i));
    }
    for (; i < i1; ++i) h[i] = g[i] * (1.0f / (1.0f + simd::exp1(-g[i]))) * u[i];
  });
}

// With s = sigmoid(g): dg = dh*u*s*(1 + g*(1 - s)), du = dh*g*s. 1 - s is e*s (e = exp(-g)) where that
// avoids cancellation (g > 0), and 1 - s where e may overflow (g < 0).
void silu_mul_backward(const ref::Call& c) {
  const float *dh = c.in[0].as<float>(), *g = c.in[1].as<float>(), *u = c.in[2].as<float>();
  float *dg = c.out[0].as<float>(), *du = c.out[1].as<float>();
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512())
    return parallel_for(c.out[0].numel(), 1 << 14,
                        [&](int64_t i0, int64_t i1) { avx512::silu_mul_backward(dh, g, u, dg, du, i0, i1); });
#endif
  parallel_for(c.out[0].numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    auto step = [&](vf dhv, vf gv, vf uv, vf& dgv, vf& duv) {
      vf e = simd::exp(-gv);
      vf s = 1.0f / (1.0f + e);
      vf oms = e > 1.0f ? 1.0f - s : e * s;
      dgv = dhv * uv * s * (1.0f + gv * oms);
      duv = dhv * gv * s;
    };
    int64_t i = i0;
    for (; i + kLanes <= i1; i += kLanes) {
      vf a, b;
      step(simd::load(dh + i), simd::load(g + i), simd::load(u + i), a, b);
      simd::store(dg + i, a);
      simd::store(du + i, b);
    }
    for (; i < i1; ++i) {
      vf a, b;
      step(simd::splat(dh[i]), simd::splat(g[i]), simd::splat(u[i]), a, b);
      dg[i] = a[0];
      du[i] = b[0];
    }
  });
}

namespace {
// The cosines and sines of RoPE's angles for position p + pos_offset (the reference's expressions) into
// cs, sn [D / 2].
void rope_angles(double p, int64_t D, double theta, double sign, const std::vector<float>& freqs, double* cs,
                 double* sn) {
  for (int64_t i = 0; i < D / 2; ++i) {
    const double f = freqs.empty() ? std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D))
                                   : static_cast<double>(freqs[static_cast<size_t>(i)]);
    double angle = sign * p * f;
    cs[i] = std::cos(angle);
    sn[i] = std::sin(angle);
  }
}

// The angles of positions [0, T) (+ pos_offset), kept for the next calls with the same arguments: a
// training step applies RoPE with the same table to q and k of every layer (and the backward with the
// negated angles), and computing it took most of the op's time. A table made from rope's freqs input is
// keyed by their values (D/2 floats: cheap to compare). Packed samples (pos) index it by pos[b, t].
struct RopeTable {
  int64_t T, D;
  double theta, pos_offset, sign;
  std::vector<float> freqs;    // empty: theta^(-2i/D)
  std::vector<double> cs, sn;  // [T, D / 2]
};

std::shared_ptr<const RopeTable> rope_table(int64_t T, int64_t D, double theta, double pos_offset, double sign,
                                            std::vector<float> freqs) {
  static std::mutex mu;
  static std::vector<std::shared_ptr<const RopeTable>> recent;  // newest last, at most 8
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& e : recent)
    if (e->T == T && e->D == D && e->theta == theta && e->pos_offset == pos_offset && e->sign == sign &&
        e->freqs == freqs)
      return e;
  auto e = std::make_shared<RopeTable>(RopeTable{T, D, theta, pos_offset, sign, std::move(freqs), {}, {}});
  const int64_t half = D / 2;
  e->cs.resize(static_cast<size_t>(T * half));
  e->sn.resize(static_cast<size_t>(T * half));
  for (int64_t t = 0; t < T; ++t)
    rope_angles(static_cast<double>(t) + pos_offset, D, theta, sign, e->freqs, e->cs.data() + t * half,
                e->sn.data() + t * half);
  if (recent.size() == 8) recent.erase(recent.begin());
  recent.push_back(e);
  return e;
}

// Rotates `rows` contiguous rows of D values by one position's angles.
void rotate_rows(const float* x, float* y, const double* cs, const double* sn, int64_t D, int64_t rows) {
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512()) return avx512::rope_rows(x, y, cs, sn, D, rows);
#endif
  for (int64_t h = 0; h < rows; ++h, x += D, y += D)
    for (int64_t i = 0; i < D / 2; ++i) {
      double x0 = x[2 * i], x1 = x[2 * i + 1];
      y[2 * i] = static_cast<float>(x0 * cs[i] - x1 * sn[i]);
      y[2 * i + 1] = static_cast<float>(x0 * sn[i] + x1 * cs[i]);
    }
}

// RoPE with the reference's double arithmetic (bit-identical): tasks own positions t and loop over batch
// (the H rows of (b, t) are contiguous). A packed position pos[b, t] outside the table's [0, T) (which
// no packing makes) gets its angles computed on the spot, by the same expressions.
void rotate(const ref::Call& c, double sign) {
  const Shape& s = c.in[0].shape;
  const int r = s.rank();
  const int64_t B = r == 4 ? s[0] : 1, T = s[r - 3], H = s[r - 2], D = s[r - 1], half = D / 2;
  const float* xp = c.in[0].as<float>();
  const int32_t* pos = c.has_in(2) ? c.in[2].as<int32_t>() : nullptr;
  float* yp = c.out[0].as<float>();
  std::vector<float> freqs;
  if (c.has_in(1)) freqs.assign(c.in[1].as<float>(), c.in[1].as<float>() + half);
  const auto table = rope_table(T, D, c.floats[0], c.floats[1], sign, std::move(freqs));
  parallel_for(T, std::max<int64_t>(1, 4096 / std::max<int64_t>(B * H * D, 1)), [&](int64_t t0, int64_t t1) {
    std::vector<double> own;  // angles of a position outside the table
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t p = pos ? pos[b * T + t] : t;
        const double *cs, *sn;
        if (p >= 0 && p < T) {
          cs = table->cs.data() + p * half;
          sn = table->sn.data() + p * half;
        } else {
          own.resize(static_cast<size_t>(2 * half));
          rope_angles(static_cast<double>(p) + c.floats[1], D, c.floats[0], sign, table->freqs, own.data(),
                      own.data() + half);
          cs = own.data();
          sn = own.data() + half;
        }
        rotate_rows(xp + (b * T + t) * H * D, yp + (b * T + t) * H * D, cs, sn, D, H);
      }
  });
}
}  // namespace

void rope(const ref::Call& c) { rotate(c, 1.0); }
void rope_backward(const ref::Call& c) { rotate(c, -1.0); }

// out[i, :] = w[idx[i] - first, :] for an index of this part (rows first .. first+Vp-1 of `total`); NaN rows
// for indices outside [0, total); rows of other parts are left as they are.
void embedding(const ref::Call& c) {
  const int64_t Vp = c.in[0].shape[0], D = c.in[0].shape[1], n = c.in[1].numel();
  const int64_t first = c.ints.size() > 0 ? c.ints[0] : 0, total = c.ints.size() > 1 ? c.ints[1] : Vp;
  const float* w = c.in[0].as<float>();
  const int32_t* idx = c.in[1].as<int32_t>();
  float* o = c.out[0].as<float>();
  parallel_for(n, row_grain(D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t v = idx[i];
      if (v < 0 || v >= total) std::fill(o + i * D, o + (i + 1) * D, kNaN);
      else if (v >= first && v < first + Vp) std::copy(w + (v - first) * D, w + (v - first + 1) * D, o + i * D);
    }
  });
}

// dw (zeroed unless accumulate) [idx[i] - first, :] += dout[i, :] in order of i, for indices of this part.
// Tasks own column ranges, so each element sees the reference's additions in the reference's order:
// bit-identical.
void embedding_backward(const ref::Call& c) {
  const int64_t V = c.out[0].shape[0], D = c.out[0].shape[1], n = c.in[1].numel();
  const int64_t first = c.ints.size() > 1 ? c.ints[1] : 0;
  const float* dout = c.in[0].as<float>();
  const int32_t* idx = c.in[1].as<int32_t>();
  float* w = c.out[0].as<float>();
  const bool accumulate = c.ints[0] != 0;
  constexpr int64_t kCols = 32;
  parallel_for((D + kCols - 1) / kCols, 1, [&](int64_t a, int64_t b) {
    const int64_t d0 = a * kCols, d1 = std::min(D, b * kCols);
    if (!accumulate)
      for (int64_t v = 0; v < V; ++v) std::fill(w + v * D + d0, w + v * D + d1, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(idx[i]) - first;
      if (v < 0 || v >= V) continue;
      float* wr = w + v * D;
      const float* dr = dout + i * D;
      for (int64_t d = d0; d < d1; ++d) wr[d] += dr[d];
    }
  });
}

}  // namespace edgetrain::cpu::fast
