// Fast CPU kernels of the softmax family: fused cross-entropy (one-pass online softmax per row; and over a
// vocabulary in parts, logsumexp_rows + fused_ce_part), softmax, log_softmax, their backward and the causal
// softmax. Rows are spread over the worker pool; every reduction has a fixed order (lane sums, per-row
// partials summed in index order), so results do not depend on the thread count. Rows holding NaN or
// infinities take a slow path written like the reference, so the NaN rules are the reference's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/row_math.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {

using namespace rows;

namespace {

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

// y = softmax(s * x) over n values.
void softmax_row(const float* x, float* y, int64_t n, float s) {
  float m;
  double l;
  if (!max_sumexp(x, n, s, m, l)) return ref::softmax_row(x, y, n, s);  // the reference's double row
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
      lse[r] = static_cast<float>(ref::part_lse(mx, z, accumulate, lse[r]));
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

}  // namespace edgetrain::cpu::fast
