// Causal attention forward on the tensor cores (the f16 flag: fp16 q, k, v and probabilities, fp32 scores,
// softmax state and output), flash-attention style: one workgroup per (batch, query head, block of 64
// queries), heavy (late) blocks first. Each subgroup keeps its 16 query rows as fp16 fragments and its
// 16 x HC output in accumulators; per tile of BR keys: S = Q K^T on the tensor cores, masked and scaled on
// the accumulators' elements, the row max merged over each quad of lanes, the output rescaled element by
// element, and O += P V with P = exp(s - m) converted to fp16 fragments in registers. Layouts, masking
// (HAS_POS) and outputs as attention.comp; shared pieces in attention_coop.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_coop.glsl"
#include "generic_common.glsl"
layout(constant_id = 2) const uint HAS_POS = 0;  // 1: binding 3 holds pos [B, T]

layout(set = 0, binding = 0) readonly buffer Qb { float q[]; };
layout(set = 0, binding = 0) readonly buffer Qv { vec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer Kb { float k[]; };
layout(set = 0, binding = 1) readonly buffer Kv { vec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer Vb { float v[]; };
layout(set = 0, binding = 2) readonly buffer Vv { vec4 v4[]; };
layout(set = 0, binding = 3) readonly buffer Pb { int tok_pos[]; };  // a dummy unless HAS_POS
layout(set = 0, binding = 4) writeonly buffer Ob { float o[]; };
layout(set = 0, binding = 5) writeonly buffer Lb { float lse[]; };
layout(set = 0, binding = 6) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nqb;  // query blocks per (batch, head)
  uint scale_idx;
} p;

uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

void main() {
  const uint wid = et_group();
  if (wid >= p.B * p.H * p.nqb) return;  // uniform per workgroup
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, rq = lane >> 2u, cq = 2u * (lane & 3u);
  const uint bh = wid / p.nqb, qb = p.nqb - 1u - (wid - bh * p.nqb);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * AR, nq = min(AR, p.T - t0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint qbase = ((b * p.T + t0) * p.H + h) * p.hd, kbase = (b * p.S * p.KV + g) * p.hd;
  const float scale = scal[p.scale_idx];
  // This lane's two queries (past T for the padding rows of the last block): rows rq and rq + 8.
  const uint tq[2] = {t0 + sg * 16u + rq, t0 + sg * 16u + rq + 8u};

  ET_LOAD_F16(0u, AR, q, q4, qbase, qstride, nq, p.hd)
  barrier();
  HALF qf[NH_MAX];
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(qf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);

  // Each row's running max and (this lane's part of) its sum.
  float m[2] = {-ET_INF, -ET_INF}, l[2] = {0.0, 0.0};
  ACC oa[NH_MAX];
  [[unroll]] for (uint n = 0u; n < NH; ++n) oa[n] = ACC(0.0);
  const uint kend = t0 + nq + off;  // keys [0, kend) are seen by some query of the block
  uint first[2] = {0u, 0u}, cbeg = 0u;
  if (HAS_POS == 1u) {
    [[unroll]] for (uint r = 0u; r < 2u; ++r) first[r] = tq[r] < p.T ? first_key(b, tq[r]) : 0u;
    cbeg = first_of_block(b, t0, nq) / BR * BR;
  }
  const uint VT = BR * KP8;  // V's tile follows K's
  vec4 kt[NS_MAX], vt[NS_MAX];  // the next K and V tiles, in flight
  if (cbeg < kend) {
    ET_FETCH_TILE(kt, k, k4, kbase + cbeg * kstride, kstride, p.S - cbeg, p.hd)
    ET_FETCH_TILE(vt, v, v4, kbase + cbeg * kstride, kstride, p.S - cbeg, p.hd)
  }
  for (uint c0 = cbeg; c0 < kend; c0 += BR) {
    barrier();  // every subgroup is done with the previous tiles (and the Q tile)
    ET_PUT_TILE(kt, 0u)
    ET_PUT_TILE(vt, VT)
    barrier();
    const uint cn = c0 + BR;
    if (cn < kend) {
      ET_FETCH_TILE(kt, k, k4, kbase + cn * kstride, kstride, p.S - cn, p.hd)
      ET_FETCH_TILE(vt, v, v4, kbase + cn * kstride, kstride, p.S - cn, p.hd)
    }
    // Scaled scores; future keys, keys past S and keys before the sample: -inf.
    ACC s[NB_MAX];
    float tmax[2] = {-ET_INF, -ET_INF};
    [[unroll]] for (uint j = 0u; j < NB; ++j) {
      ET_SCORES(s[j], qf, 0u, j)
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        const uint r = acc_row_half(i), c = c0 + j * 16u + cq + acc_col(i);
        const bool seen = c < p.S && c <= tq[r] + off && (HAS_POS == 0u || c >= first[r]);
        const float x = seen ? scale * s[j][i] : -ET_INF;
        s[j][i] = x;
        tmax[r] = max(tmax[r], x);
      }
    }
    // Tile 0 holds key 0, which every query sees: from then on m is finite. Under HAS_POS a row's first
    // tiles may hold none of its keys (mn = -inf): they add exp(-inf - 0) = 0.
    float alpha[2], mz[2];
    [[unroll]] for (uint r = 0u; r < 2u; ++r) {
      const float mn = max(m[r], quad_max(tmax[r]));
      alpha[r] = m[r] == mn ? 1.0 : exp(m[r] - mn);
      mz[r] = HAS_POS == 1u && mn == -ET_INF ? 0.0 : mn;
      m[r] = mn;
      l[r] *= alpha[r];
    }
    HALF pf[NB_MAX];
    [[unroll]] for (uint j = 0u; j < NB; ++j) {
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        const uint r = acc_row_half(i);
        const float e = exp(s[j][i] - mz[r]);  // exp(-inf) = 0 for masked keys
        s[j][i] = e;
        l[r] += e;
      }
      pf[j] = HALF(s[j]);
    }
    [[unroll]] for (uint n = 0u; n < NH; ++n)
      [[unroll]] for (uint i = 0u; i < 8u; ++i) oa[n][i] *= alpha[acc_row_half(i)];
    ET_TIMES_TILE(oa, pf, VT)
  }
  float inv[2];
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    l[r] = quad_sum(l[r]);
    inv[r] = 1.0 / l[r];
  }
  [[unroll]] for (uint n = 0u; n < NH; ++n)
    [[unroll]] for (uint i = 0u; i < 8u; ++i) oa[n][i] *= inv[acc_row_half(i)];
  ET_STORE_ROWS(oa, 1.0, sg, lane, o, qbase + sg * 16u * qstride, qstride, nq > sg * 16u ? nq - sg * 16u : 0u, p.hd)
  if ((lane & 3u) == 0u)
    [[unroll]] for (uint r = 0u; r < 2u; ++r)
      if (tq[r] < p.T) lse[(b * p.H + h) * p.T + tq[r]] = m[r] + log(l[r]);
}
