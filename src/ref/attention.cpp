// Reference of causal attention and its backward (the llama family's fused attention): plain loops over
// (batch, query head, query), every dot product and sum in double. The layouts are the model's own, so
// nothing is permuted around the op: q and out [B, T, H, hd] (rows of the Q projection), k and v
// [B, S, KV, hd] (rows of the K and V projections, or a KV cache's first S rows), lse [B, H, T].
// Grouped-query attention: query head h reads kv head h / (H / KV). The T queries are the last T of the S
// positions, so query t sees keys j <= t + S - T (S == T in training; S > T when a KV cache holds S - T
// earlier positions). Every query sees at least key 0, so no row is empty.
// Sample packing: with pos [B, T] (S == T) query t of sequence b sees only keys j in [t - p, t],
// p = pos[b, t] clamped to [0, t]: the prefix of its own sample. Still at least key t, so no row is empty.
// The f16 flag (ops.inc): q, k, v, dout rounded to fp16 on entry (rounded copies), and the probabilities
// exp(s - m) and dS rounded before they enter a product; sums stay in double.
#include <cmath>
#include <limits>
#include <vector>

#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

struct Dims {
  int64_t B, T, S, H, KV, hd, G;
  explicit Dims(const Call& c)
      : B(c.in[c.op == Op::attention ? 0 : 1].shape[0]),
        T(c.in[c.op == Op::attention ? 0 : 1].shape[1]),
        S(c.in[c.op == Op::attention ? 1 : 2].shape[1]),
        H(c.in[c.op == Op::attention ? 0 : 1].shape[2]),
        KV(c.in[c.op == Op::attention ? 1 : 2].shape[2]),
        hd(c.in[c.op == Op::attention ? 0 : 1].shape[3]),
        G(H / KV) {}
  int64_t q_row(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * H + h) * hd; }
  int64_t k_row(int64_t b, int64_t j, int64_t g) const { return ((b * S + j) * KV + g) * hd; }
  int64_t visible(int64_t t) const { return t + S - T + 1; }  // keys first(b, t) .. visible-1
  // The first key query t of sequence b sees: 0, or its sample's first token when pos is given.
  int64_t first(const int32_t* pos, int64_t b, int64_t t) const {
    if (!pos) return 0;
    const int64_t p = pos[b * T + t];
    return t - (p < 0 ? 0 : p > t ? t : p);
  }
};

// The operand x of a call, or its copy rounded as the GEMMs round theirs (kept in buf) under the f16 flag.
const float* operand(const View& x, bool f16, std::vector<float>& buf) {
  if (!f16) return x.as<float>();
  buf.assign(x.as<float>(), x.as<float>() + x.numel());
  for (float& v : buf) v = gemm_operand(v, true);
  return buf.data();
}
// A probability or dS as it enters a product: rounded to fp16 under the flag.
double factor(double x, bool f16) { return f16 ? gemm_operand(static_cast<float>(x), true) : x; }

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace

// q [B,T,H,hd], k, v [B,S,KV,hd], pos [B,T] optional; floats {scale} -> out [B,T,H,hd], lse [B,H,T]. For
// query t of head h (kv head g = h / (H/KV)) with scores s_j = scale * q_t . k_j over the visible keys
// (j <= t + S - T; with pos, t - p <= j <= t):
// m = max_j s_j, z = sum_j exp(s_j - m), out_t = sum_j (exp(s_j - m) / z) v_j and lse = m + log z.
// A NaN score (or a +inf one) makes its row NaN through z; a -inf score has weight 0, as in softmax.
void attention(const Call& c) {
  const Dims d(c);
  const bool f16 = f16_flag(c, 0);
  std::vector<float> qb, kb, vb;
  const float *q = operand(c.in[0], f16, qb), *k = operand(c.in[1], f16, kb), *v = operand(c.in[2], f16, vb);
  float *o = c.out[0].as<float>(), *lse = c.out[1].as<float>();
  const double scale = c.floats[0];
  const int32_t* pos = c.has_in(3) ? c.in[3].as<int32_t>() : nullptr;
  std::vector<double> s(static_cast<size_t>(d.S)), acc(static_cast<size_t>(d.hd));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t g = h / d.G, j0 = d.first(pos, b, t), n = d.visible(t);
        const float* qr = q + d.q_row(b, t, h);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = j0; j < n; ++j) {
          s[j] = scale * dot(qr, k + d.k_row(b, j, g), d.hd);
          m = std::max(m, s[j]);
        }
        double z = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = j0; j < n; ++j) {
          const double p = std::exp(s[j] - m), pf = factor(p, f16);
          z += p;
          const float* vr = v + d.k_row(b, j, g);
          for (int64_t e = 0; e < d.hd; ++e) acc[e] += pf * vr[e];
        }
        float* orow = o + d.q_row(b, t, h);
        for (int64_t e = 0; e < d.hd; ++e) orow[e] = static_cast<float>(acc[e] / z);
        lse[(b * d.H + h) * d.T + t] = static_cast<float>(m + std::log(z));
      }
}

// dout, q, out [B,T,H,hd], k, v [B,S,KV,hd], lse [B,H,T], pos [B,T] optional; floats {scale} ->
// dq [B,T,H,hd], dk, dv [B,S,KV,hd]. The gradient of attention given its saved out and lse (the op uses
// them as given): for query t of head h and visible key j, p_tj = exp(scale * q_t . k_j - lse_t),
// D_t = dout_t . out_t, ds_tj = p_tj * (dout_t . v_j - D_t); dq_t = scale * sum_j ds_tj k_j,
// dk_j = scale * sum_{h,t} ds_tj q_t and dv_j = sum_{h,t} p_tj dout_t, where dk and dv sum over the query
// heads h of kv head j's group. Keys no query sees (none when S == T) get zero gradients. pos masks as in
// the forward.
void attention_backward(const Call& c) {
  const Dims d(c);
  const bool f16 = f16_flag(c, 0);
  std::vector<float> db, qb, kb, vb;
  const float *dout = operand(c.in[0], f16, db), *q = operand(c.in[1], f16, qb), *k = operand(c.in[2], f16, kb),
              *v = operand(c.in[3], f16, vb), *out = c.in[4].as<float>(), *lse = c.in[5].as<float>();
  float *dq = c.out[0].as<float>(), *dk = c.out[1].as<float>(), *dv = c.out[2].as<float>();
  const double scale = c.floats[0];
  const int32_t* pos = c.has_in(6) ? c.in[6].as<int32_t>() : nullptr;
  const size_t kv_numel = static_cast<size_t>(d.B * d.S * d.KV * d.hd);
  std::vector<double> dk_acc(kv_numel, 0.0), dv_acc(kv_numel, 0.0), dq_acc(static_cast<size_t>(d.hd));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t g = h / d.G, j0 = d.first(pos, b, t), n = d.visible(t), qo = d.q_row(b, t, h);
        // D from dout as given (it is a sum, not a product's operand).
        const double D = dot(c.in[0].as<float>() + qo, out + qo, d.hd), l = lse[(b * d.H + h) * d.T + t];
        std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
        for (int64_t j = j0; j < n; ++j) {
          const int64_t ko = d.k_row(b, j, g);
          const double p = std::exp(scale * dot(q + qo, k + ko, d.hd) - l);
          const double ds = factor(p * (dot(dout + qo, v + ko, d.hd) - D), f16), pf = factor(p, f16);
          for (int64_t e = 0; e < d.hd; ++e) {
            dq_acc[e] += scale * ds * k[ko + e];
            dk_acc[ko + e] += scale * ds * q[qo + e];
            dv_acc[ko + e] += pf * dout[qo + e];
          }
        }
        for (int64_t e = 0; e < d.hd; ++e) dq[qo + e] = static_cast<float>(dq_acc[e]);
      }
  for (size_t i = 0; i < kv_numel; ++i) {
    dk[i] = static_cast<float>(dk_acc[i]);
    dv[i] = static_cast<float>(dv_acc[i]);
  }
}

}  // namespace edgetrain::ref
