// Fast CPU causal attention (forward and backward) in the reference's layouts, blocked so that no T x S
// score matrix exists: a task holds the scores of at most kRows queries x kKeys keys at a time. Products are
// single-threaded OpenBLAS sgemm calls that read q/k/v/out rows in place through their strides (H*hd for
// queries, KV*hd for keys), so nothing is permuted or copied. The forward runs one task per (batch, query
// head, block of kRows queries) with an online softmax across key blocks; the backward one task per
// (batch, kv head), which owns its dk/dv rows and sums its group's query heads in head order. The blocking
// depends only on the shapes (and pos), so results do not depend on the thread count.
// Sample packing (pos): query t sees keys [first(t), t] only; a block of queries starts its key loop at the
// smallest first() of its rows, so a packed sequence of short samples costs about its samples' own
// attention, not T^2; keys of a key block outside a row's window get probability 0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {
namespace {

using simd::kLanes;
using simd::vf;
constexpr int64_t kRows = 64;   // queries per block
constexpr int64_t kKeys = 256;  // keys per block of scores: 64 x 256 floats = 64 KiB per buffer

struct Geo {
  int64_t B, T, S, H, KV, hd, G, ldq, ldk;
  Geo(const ref::View& q, const ref::View& k)
      : B(q.shape[0]), T(q.shape[1]), S(k.shape[1]), H(q.shape[2]), KV(k.shape[2]), hd(q.shape[3]), G(H / KV),
        ldq(H * hd), ldk(KV * hd) {}
  int64_t blocks() const { return (T + kRows - 1) / kRows; }
  int64_t q_off(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * H + h) * hd; }
  int64_t k_off(int64_t b, int64_t j, int64_t g) const { return ((b * S + j) * KV + g) * hd; }
  // Keys row r of the block at t0 sees within the key block at c0 of nc keys (may be <= 0).
  int64_t visible(int64_t t0, int64_t r, int64_t c0, int64_t nc) const {
    return std::min(nc, t0 + r + S - T + 1 - c0);
  }
  // The first key query t of sequence b sees: 0, or with pos (S == T) t - clamp(pos[b, t], 0, t).
  int64_t first(const int32_t* pos, int64_t b, int64_t t) const {
    if (!pos) return 0;
    const int64_t p = pos[b * T + t];
    return t - (p < 0 ? 0 : p > t ? t : p);
  }
  // The first key any of the nr queries from t0 sees.
  int64_t first_of_block(const int32_t* pos, int64_t b, int64_t t0, int64_t nr) const {
    int64_t f = pos ? t0 + nr : 0;
    for (int64_t r = 0; pos && r < nr; ++r) f = std::min(f, first(pos, b, t0 + r));
    return f;
  }
};

float row_max(const float* x, int64_t n) {
  vf mv = simd::splat(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    vf v = simd::load(x + j);
    mv = v > mv ? v : mv;
  }
  float m = simd::hmax(mv);
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// x[j] = exp(x[j] - m) for lo <= j < hi, 0 for the other j < len; returns the sum of those exps (fixed
// lane order). lo and hi may lie outside [0, len].
float exp_row(float* x, int64_t lo, int64_t hi, int64_t len, float m) {
  lo = std::clamp<int64_t>(lo, 0, len);
  const int64_t n = std::clamp<int64_t>(hi, lo, len);
  std::fill(x, x + lo, 0.0f);
  const vf mm = simd::splat(m);
  vf acc = {};
  int64_t j = lo;
  for (; j + kLanes <= n; j += kLanes) {
    vf p = simd::exp(simd::load(x + j) - mm);
    acc += p;
    simd::store(x + j, p);
  }
  float s = simd::hsum(acc);
  for (; j < n; ++j) s += (x[j] = simd::exp1(x[j] - m));
  std::fill(x + n, x + len, 0.0f);
  return s;
}

float dot(const float* a, const float* b, int64_t n) {
  vf acc = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) acc += simd::load(a + j) * simd::load(b + j);
  float s = simd::hsum(acc);
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

// q [B,T,H,hd], k, v [B,S,KV,hd], pos [B,T] optional; floats {scale} -> out [B,T,H,hd], lse [B,H,T] (the
// reference's contract).
void attention(const ref::Call& c) {
  const Geo d(c.in[0], c.in[1]);
  // The f16 flag: rounded copies of the operands feed the same kernel (no faster fp16 path here); the
  // probabilities stay fp32, which the flag allows (ops.inc).
  const bool f16 = ref::f16_flag(c, 0);
  std::vector<float> qb, kb, vb;
  const float *q = gemm_operand(c.in[0].as<float>(), c.in[0].numel(), f16, qb),
              *k = gemm_operand(c.in[1].as<float>(), c.in[1].numel(), f16, kb),
              *v = gemm_operand(c.in[2].as<float>(), c.in[2].numel(), f16, vb);
  const int32_t* pos = c.has_in(3) ? c.in[3].as<int32_t>() : nullptr;
  float *o = c.out[0].as<float>(), *lse = c.out[1].as<float>();
  const float scale = c.floats[0];
  const int64_t nqb = d.blocks();
  parallel_for(d.B * d.H * nqb, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> s(kRows * kKeys), acc(kRows * d.hd), m(kRows), l(kRows);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / (d.H * nqb), h = i / nqb % d.H, t0 = i % nqb * kRows, g = h / d.G;
      const int64_t nr = std::min(kRows, d.T - t0), kend = t0 + nr + d.S - d.T;
      const float* qp = q + d.q_off(b, t0, h);
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      for (int64_t c0 = d.first_of_block(pos, b, t0, nr); c0 < kend; c0 += kKeys) {
        const int64_t nc = std::min(kKeys, kend - c0);
        sgemm1(false, true, nr, nc, d.hd, scale, qp, d.ldq, k + d.k_off(b, c0, g), d.ldk, 0.0f, s.data(), nc);
        for (int64_t r = 0; r < nr; ++r) {
          float* row = s.data() + r * nc;
          const int64_t lo = std::max<int64_t>(d.first(pos, b, t0 + r) - c0, 0), vis = d.visible(t0, r, c0, nc);
          if (vis <= lo) {  // the whole block lies in this query's future (or before its sample)
            std::fill(row, row + nc, 0.0f);
            continue;
          }
          const float mn = std::max(m[r], row_max(row + lo, vis - lo));
          const float alpha = std::exp(m[r] - mn);  // 0 on the first block (m = -inf)
          const float sum = exp_row(row, lo, vis, nc, mn);
          l[r] = l[r] * alpha + sum;
          if (alpha != 1.0f)
            for (int64_t e = 0; e < d.hd; ++e) acc[r * d.hd + e] *= alpha;
          m[r] = mn;
        }
        sgemm1(false, false, nr, d.hd, nc, 1.0f, s.data(), nc, v + d.k_off(b, c0, g), d.ldk, 1.0f, acc.data(), d.hd);
      }
      for (int64_t r = 0; r < nr; ++r) {
        float* orow = o + d.q_off(b, t0 + r, h);
        const float inv = 1.0f / l[r];
        for (int64_t e = 0; e < d.hd; ++e) orow[e] = acc[r * d.hd + e] * inv;
        lse[(b * d.H + h) * d.T + t0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// dout, q, k, v, out, lse, pos optional; floats {scale} -> dq, dk, dv (the reference's contract). Per (batch, kv head):
// for each query head of the group and block of queries, per block of keys: P = exp(scale q k^T - lse),
// dS = P * (dout v^T - D) with D = rowsum(dout * out); dq = scale dS k (summed over key blocks),
// dv += P^T dout, dk += scale dS^T q into the task's own [S, hd] accumulators.
void attention_backward(const ref::Call& c) {
  const Geo d(c.in[1], c.in[2]);
  const bool f16 = ref::f16_flag(c, 0);  // rounded operand copies, as the forward
  std::vector<float> db, qb, kb, vb;
  const float *dout = gemm_operand(c.in[0].as<float>(), c.in[0].numel(), f16, db),
              *q = gemm_operand(c.in[1].as<float>(), c.in[1].numel(), f16, qb),
              *k = gemm_operand(c.in[2].as<float>(), c.in[2].numel(), f16, kb),
              *v = gemm_operand(c.in[3].as<float>(), c.in[3].numel(), f16, vb), *out = c.in[4].as<float>(),
              *lse = c.in[5].as<float>();
  float *dq = c.out[0].as<float>(), *dk = c.out[1].as<float>(), *dv = c.out[2].as<float>();
  const int32_t* pos = c.has_in(6) ? c.in[6].as<int32_t>() : nullptr;
  const float scale = c.floats[0];
  const int64_t nqb = d.blocks();
  parallel_for(d.B * d.KV, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> p(kRows * kKeys), ds(kRows * kKeys), D(kRows), dk_acc(d.S * d.hd), dv_acc(d.S * d.hd);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / d.KV, g = i % d.KV;
      const float *kp = k + d.k_off(b, 0, g), *vp = v + d.k_off(b, 0, g);
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      for (int64_t h = g * d.G; h < (g + 1) * d.G; ++h)
        for (int64_t qb = 0; qb < nqb; ++qb) {
          const int64_t t0 = qb * kRows, nr = std::min(kRows, d.T - t0), kend = t0 + nr + d.S - d.T;
          const int64_t qo = d.q_off(b, t0, h);
          const float* lrow = lse + (b * d.H + h) * d.T + t0;
          for (int64_t r = 0; r < nr; ++r) D[r] = dot(dout + qo + r * d.ldq, out + qo + r * d.ldq, d.hd);
          const int64_t kbeg = d.first_of_block(pos, b, t0, nr);
          for (int64_t c0 = kbeg; c0 < kend; c0 += kKeys) {
            const int64_t nc = std::min(kKeys, kend - c0);
            sgemm1(false, true, nr, nc, d.hd, scale, q + qo, d.ldq, kp + c0 * d.ldk, d.ldk, 0.0f, p.data(), nc);
            sgemm1(false, true, nr, nc, d.hd, 1.0f, dout + qo, d.ldq, vp + c0 * d.ldk, d.ldk, 0.0f, ds.data(), nc);
            for (int64_t r = 0; r < nr; ++r) {
              float *pr = p.data() + r * nc, *dr = ds.data() + r * nc;
              exp_row(pr, d.first(pos, b, t0 + r) - c0, d.visible(t0, r, c0, nc), nc, lrow[r]);
              const vf Dv = simd::splat(D[r]);
              int64_t j = 0;
              for (; j + kLanes <= nc; j += kLanes)
                simd::store(dr + j, simd::load(pr + j) * (simd::load(dr + j) - Dv));
              for (; j < nc; ++j) dr[j] = pr[j] * (dr[j] - D[r]);
            }
            sgemm1(false, false, nr, d.hd, nc, scale, ds.data(), nc, kp + c0 * d.ldk, d.ldk, c0 == kbeg ? 0.0f : 1.0f,
                   dq + qo, d.ldq);
            sgemm1(true, false, nc, d.hd, nr, 1.0f, p.data(), nc, dout + qo, d.ldq, 1.0f, dv_acc.data() + c0 * d.hd, d.hd);
            sgemm1(true, false, nc, d.hd, nr, scale, ds.data(), nc, q + qo, d.ldq, 1.0f, dk_acc.data() + c0 * d.hd, d.hd);
          }
        }
      for (int64_t j = 0; j < d.S; ++j) {
        std::copy_n(dk_acc.data() + j * d.hd, d.hd, dk + d.k_off(b, j, g));
        std::copy_n(dv_acc.data() + j * d.hd, d.hd, dv + d.k_off(b, j, g));
      }
    }
  });
}

}  // namespace edgetrain::cpu::fast
