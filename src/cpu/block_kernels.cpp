// Fast CPU kernels of the Llama block's row-wise parts: RMSNorm and its backward, SwiGLU, RoPE and the
// embedding pair. Rows are spread over the worker pool; every reduction has a fixed order (per-row or
// per-block partials summed in index order), so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/avx512.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/row_math.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {

using namespace rows;

namespace {

// ---- RMSNorm backward: rows per partial of dw ----
constexpr int64_t kNormRows = 32;

}  // namespace

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

// dy, x [..., D], w [D], rstd [rows] -> dx, dw [D]; ints {accumulate, dw?}. dx per row; dw from per-32-row
// partials (double) summed in block order, unless dw = 0 (then left as it is).
void rms_norm_backward(const ref::Call& c) {
  const int64_t D = c.in[1].shape.last(), rows = c.in[1].shape.rows();
  const float *dy = c.in[0].as<float>(), *xp = c.in[1].as<float>(), *w = c.in[2].as<float>(),
              *rstd = c.in[3].as<float>();
  float *dx = c.out[0].as<float>(), *dw = c.out[1].as<float>();
  const int64_t blocks = (rows + kNormRows - 1) / kNormRows;
  const bool want_dw = c.ints.size() < 2 || c.ints[1] != 0;  // a frozen w (qlora) takes no dw at all
  std::vector<double> part(want_dw ? static_cast<size_t>(blocks * D) : 0);
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
          if (want_dw) acc[k] += dyr[k] * xh;
        }
      }
      if (want_dw) std::copy(acc.begin(), acc.end(), part.begin() + blk * D);
    }
  });
  const bool accumulate = c.ints[0] != 0;
  if (!want_dw) return;
  for (int64_t k = 0; k < D; ++k) {
    double s = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) s += part[blk * D + k];
    dw[k] = static_cast<float>(accumulate ? dw[k] + s : s);
  }
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
