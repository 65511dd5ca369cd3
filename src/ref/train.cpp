// Reference of the six training ops (OPS.md sections 2-7): the q4gsw linear forward and input gradient, the
// dense weight gradient, fused cross-entropy, requantization into W_4X8 and in-place AdamW; and the
// cross-entropy of a vocabulary in parts (logsumexp_rows, fused_ce_part), which sums to fused_ce's.
// Dot products and row sums accumulate in double: this file is the spec, so it should be as close to the
// exact real-number result as is cheap; backends accumulating in fp32 are compared with a tolerance.
#include <cmath>
#include <limits>

#include "edgetrain/q4gsw.h"
#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

// W[n,k] = (c[n,k] - 8) * scales[k / gs, n], read straight from the W_4X8 words. Only n < N, k < K are ever
// asked for, so padding nibbles are never read.
// With f16 the operand is that product as the fp32 kernels form it (one fp32 multiplication) rounded to fp16.
double q4_weight(const uint32_t* words, const float* scales, int64_t N, int64_t N8, int64_t gs, int64_t n,
                 int64_t k, bool f16 = false) {
  uint32_t c = (words[q4::w4x8_word(n, k, N8)] >> q4::w4x8_shift(n, k)) & 0xFu;
  if (f16) return gemm_operand(static_cast<float>(static_cast<int>(c) - 8) * scales[(k / gs) * N + n], true);
  return static_cast<double>(static_cast<int>(c) - 8) * static_cast<double>(scales[(k / gs) * N + n]);
}

}  // namespace

// x [..., K] (M = rows), w W_4X8 u32 words, scales [G, N], bias [N] optional, ints {group_size, f16?};
// y [..., N].
// y[m,n] = sum_k x[m,k] * (c[n,k] - 8) * scales[k/gs, n] + bias[n]
void linear_q4gsw(const Call& c) {
  const View &x = c.in[0], &y = c.out[0];
  const uint32_t* w = c.in[1].as<uint32_t>();
  const float* s = c.in[2].as<float>();
  const float* bias = c.has_in(3) ? c.in[3].as<float>() : nullptr;
  const int64_t gs = c.ints[0], K = x.shape.last(), N = c.in[2].shape[1], M = x.shape.rows();
  const int64_t N8 = (N + 7) / 8;
  const bool f16 = f16_flag(c, 1);
  const float* xp = x.as<float>();
  float* yp = y.as<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(gemm_operand(xp[m * K + k], f16)) * q4_weight(w, s, N, N8, gs, n, k, f16);
      if (bias) acc += bias[n];
      yp[m * N + n] = static_cast<float>(acc);
    }
}

// dy [..., N], w W_4X8, scales [G, N], ints {group_size, K, f16?}; dx [..., K].
// dx[m,k] = sum_n dy[m,n] * W[n,k]   (the transpose of linear_q4gsw; bias gets no gradient here)
void linear_q4gsw_backward(const Call& c) {
  const View& dy = c.in[0];
  const uint32_t* w = c.in[1].as<uint32_t>();
  const float* s = c.in[2].as<float>();
  const int64_t gs = c.ints[0], K = c.ints[1], N = c.in[2].shape[1], M = dy.shape.rows();
  const int64_t N8 = (N + 7) / 8;
  const bool f16 = f16_flag(c, 2);
  const float* dyp = dy.as<float>();
  float* dx = c.out[0].as<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n)
        acc += static_cast<double>(gemm_operand(dyp[m * N + n], f16)) * q4_weight(w, s, N, N8, gs, n, k, f16);
      dx[m * K + k] = static_cast<float>(acc);
    }
}

// dy [..., N], x [..., K] with the same M rows, ints {accumulate, f16?}; dw [N, K] fp32.
// dw[n,k] = (accumulate ? dw[n,k] : 0) + sum_m dy[m,n] * x[m,k]   (the accumulated dw is never rounded)
void linear_dW(const Call& c) {
  const View &dy = c.in[0], &x = c.in[1];
  const int64_t N = dy.shape.last(), K = x.shape.last(), M = dy.shape.rows();
  const bool accumulate = c.ints[0] != 0, f16 = f16_flag(c, 1);
  const float *dyp = dy.as<float>(), *xp = x.as<float>();
  float* dw = c.out[0].as<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double acc = accumulate ? static_cast<double>(dw[n * K + k]) : 0.0;
      for (int64_t m = 0; m < M; ++m)
        acc += static_cast<double>(gemm_operand(dyp[m * N + n], f16)) * gemm_operand(xp[m * K + k], f16);
      dw[n * K + k] = static_cast<float>(acc);
    }
}

// logits [R, V] f32, labels [R] i32, floats {n_valid}; loss [] f32, dlogits [R, V] (may be the logits buffer).
// For a row with 0 <= y < V: lse = max + ln sum_j exp(x[j] - max),
//   loss += (lse - x[y]) / n_valid, dlogits[j] = (exp(x[j] - lse) - [j == y]) / n_valid.
// y < 0 (-100, -1, ...): the row is ignored, loss += 0 and its dlogits row is 0.
// y >= V is a caller error; rather than read outside the row, that row's dlogits are NaN and so is the loss,
// which makes the mistake visible at the first loss read-back.
// Every row reads all of its logits (max, sum, x[y]) before writing any dlogits, so in-place use is safe.
void fused_ce(const Call& c) {
  const View& lg = c.in[0];
  const int64_t R = lg.shape[0], V = lg.shape[1];
  const int32_t* labels = c.in[1].as<int32_t>();
  const double n_valid = c.floats[0];
  const float* x = lg.as<float>();
  float* d = c.out[1].as<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  double loss = 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * V;
    float* drow = d + r * V;
    const int32_t y = labels[r];
    if (y < 0) {
      for (int64_t j = 0; j < V; ++j) drow[j] = 0.0f;
      continue;
    }
    if (y >= V) {
      for (int64_t j = 0; j < V; ++j) drow[j] = nan;
      loss += std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    double mx = row[0];
    for (int64_t j = 1; j < V; ++j) mx = std::fmax(mx, static_cast<double>(row[j]));
    double z = 0.0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
    const double lse = mx + std::log(z);
    const double xy = row[y];
    loss += (lse - xy) / n_valid;
    for (int64_t j = 0; j < V; ++j) {
      double p = std::exp(static_cast<double>(row[j]) - lse);
      drow[j] = static_cast<float>((p - (j == y ? 1.0 : 0.0)) / n_valid);
    }
  }
  *c.out[0].as<float>() = static_cast<float>(loss);
}

// x [R, V] f32, ints {accumulate} -> lse [R]: lse[r] = log sum_j exp(x[r,j]), the max taken out first.
// accumulate = 1 merges the old lse[r] (a previous part's) as one more term: log(exp(lse_old) + sum_j
// exp(x[r,j])), both sides scaled by the larger of their maxima; an old -inf adds nothing. Called once per
// vocabulary part (accumulate 0, then 1, 1, ...), it gives the logsumexp of the whole row.
void logsumexp_rows(const Call& c) {
  const View& xv = c.in[0];
  const int64_t R = xv.shape[0], V = xv.shape[1];
  const float* x = xv.as<float>();
  float* lse = c.out[0].as<float>();
  const bool accumulate = c.ints[0] != 0;
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * V;
    double mx = row[0];
    for (int64_t j = 1; j < V; ++j) mx = std::fmax(mx, static_cast<double>(row[j]));
    double z = 0.0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
    lse[r] = static_cast<float>(part_lse(mx, z, accumulate, lse[r]));
  }
}

double part_lse(double mx, double z, bool accumulate, double old) {
  if (!accumulate) return mx + std::log(z);
  if (std::isnan(old)) return old;
  if (old == -std::numeric_limits<double>::infinity()) return mx + std::log(z);
  const double m = std::fmax(mx, old);
  return m + std::log(z * std::exp(mx - m) + std::exp(old - m));
}

// logits [R, Vp]: columns first .. first+Vp-1 of rows of `total` classes; labels [R] i32; lse [R] (of the
// whole row, from logsumexp_rows); ints {first, total, accumulate}; floats {n_valid}; loss [], dlogits [R, Vp]
// (may be the logits buffer). Per row with label y:
//   dlogits[j] = (exp(x[j] - lse) - [first + j == y]) / n_valid,
//   row loss   = ((first == 0 ? lse : 0) - (first <= y < first + Vp ? x[y - first] : 0)) / n_valid,
// so the parts' losses add up to fused_ce's (lse - x[y]) / n_valid. y < 0: zeros and 0; y >= total: a NaN
// row and loss (as fused_ce's y >= V). loss = sum of row losses (+ its old value when accumulate = 1).
// Each row reads x[y - first] before writing dlogits, so in-place use is safe.
void fused_ce_part(const Call& c) {
  const View& lg = c.in[0];
  const int64_t R = lg.shape[0], Vp = lg.shape[1];
  const int32_t* labels = c.in[1].as<int32_t>();
  const float* lse = c.in[2].as<float>();
  const int64_t first = c.ints[0], total = c.ints[1];
  const bool accumulate = c.ints[2] != 0;
  const double n_valid = c.floats[0];
  const float* x = lg.as<float>();
  float* d = c.out[1].as<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  double loss = accumulate ? static_cast<double>(*c.out[0].as<float>()) : 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * Vp;
    float* drow = d + r * Vp;
    const int64_t y = labels[r];
    if (y < 0) {
      for (int64_t j = 0; j < Vp; ++j) drow[j] = 0.0f;
      continue;
    }
    if (y >= total) {
      for (int64_t j = 0; j < Vp; ++j) drow[j] = nan;
      loss += std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const double l = lse[r];
    const double xy = y >= first && y < first + Vp ? static_cast<double>(row[y - first]) : 0.0;
    loss += ((first == 0 ? l : 0.0) - xy) / n_valid;
    for (int64_t j = 0; j < Vp; ++j) {
      double p = std::exp(static_cast<double>(row[j]) - l);
      drow[j] = static_cast<float>((p - (first + j == y ? 1.0 : 0.0)) / n_valid);
    }
  }
  *c.out[0].as<float>() = static_cast<float>(loss);
}

// latent [N, K] f32 (in place: output 1), scales [G, N] (not changed), ints {group_size}; w: every W_4X8
// word of [N, K]. c[n,k] = q4::requant_code(latent, s) = clamp(roundEven(latent/s), -8, 7) + 8 with
// s = scales[k/gs, n], s == 0 or a NaN latent giving code 8; padding nibbles (n >= N or k >= K) are code 8.
// Then latent[n,k] = q4::clamp_to_range(latent, s) = clamp(latent, -8.5s, 7.5s) (NaN stays NaN): the
// latent never leaves the interval its code rounds from, so it keeps describing the weight; clamping never
// changes the code. The bounds are single products: exact for fp16 scales (never fp32-denormal), correctly
// rounded on every backend (a GPU that flushes denormals may differ only for scales below 1e-38).
void q4gsw_requant(const Call& c) {
  const View& lat = c.in[0];
  const int64_t N = lat.shape[0], K = lat.shape[1], gs = c.ints[0];
  const int64_t N8 = (N + 7) / 8;
  const float* s = c.in[1].as<float>();
  float* lp = c.out[1].as<float>();  // the latent itself
  uint32_t* w = c.out[0].as<uint32_t>();
  for (int64_t i = 0; i < c.out[0].numel(); ++i) w[i] = 0x88888888u;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const float sc = s[(k / gs) * N + n];
      uint32_t code = q4::requant_code(lp[n * K + k], sc);
      lp[n * K + k] = q4::clamp_to_range(lp[n * K + k], sc);
      uint32_t& word = w[q4::w4x8_word(n, k, N8)];
      int sh = q4::w4x8_shift(n, k);
      word = (word & ~(0xFu << sh)) | (code << sh);
    }
}

// param, m, v, grad: f32 with equal numel; outputs are param, m, v themselves (in place).
// floats {lr, beta1, beta2, eps, weight_decay, bc1, bc2}; per element, in this order (OPS.md section 7):
//   p -= lr*wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; p -= lr*(m/bc1) / (sqrt(v/bc2) + eps)
// Computed in fp32 like every backend: it is elementwise, so there is no accumulation to make exact.
void adamw_step(const Call& c) {
  float* p = c.out[0].as<float>();
  float* m = c.out[1].as<float>();
  float* v = c.out[2].as<float>();
  float* grad = c.out[3].as<float>();
  const bool scaled = c.has_in(4);
  const float s = scaled ? c.in[4].as<float>()[0] : 1.0f;
  const float lr = c.floats[0], b1 = c.floats[1], b2 = c.floats[2], eps = c.floats[3], wd = c.floats[4],
              bc1 = c.floats[5], bc2 = c.floats[6];
  for (int64_t i = 0; i < c.in[0].numel(); ++i) {
    const float g = scaled ? grad[i] * s : grad[i];
    float pi = p[i];
    pi = pi - lr * wd * pi;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    pi = pi - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    grad[i] = 0.0f;
  }
}

// latent [N, K], m, v, grad of its shape, scales [G, N], grad_scale? (inputs 0..5); outputs latent, m, v,
// grad (in place) and w; ints {group_size}; floats as adamw_step's. Defined as the two ops in turn: a 4-bit
// weight's update, which the backends fuse into one pass over the weight.
void adamw_q4gsw_step(const Call& c) {
  Call adamw{Op::adamw_step, {c.in[0], c.in[1], c.in[2], c.in[3]}, {c.out[0], c.out[1], c.out[2], c.out[3]}, {},
             c.floats};
  if (c.has_in(5)) adamw.in.push_back(c.in[5]);
  adamw_step(adamw);
  q4gsw_requant(Call{Op::q4gsw_requant, {c.out[0], c.in[4]}, {c.out[4], c.out[0]}, {c.ints[0]}, {}});
}

}  // namespace edgetrain::ref
