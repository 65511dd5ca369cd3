// Causal attention backward on the tensor cores (the f16 flag: fp16 q, k, v, dout, P and dS, fp32 scores,
// D, softmax and gradient sums), flash-attention-2 style without atomics, as attention_backward.comp: P is
// recomputed from q, k and the forward's lse. Two dispatches:
//   MODE 0, dq: one workgroup per (batch, query head, block of 64 queries). Writes D = rowsum(dout * out)
//     of its rows to the scratch buffer; per 16 keys of a tile of BR: S = Q K^T and dP = dout V^T in
//     accumulators, P = exp(scale S - lse) and dS = P (dP - D) on their elements, dS to fp16 fragments;
//     dq += dS K; dq *= scale.
//   MODE 1, dk/dv: one workgroup per (batch, kv head, block of 64 keys), keys and values as fp16 fragments,
//     walking every query head of the group and every tile of BR queries that sees a key of the block:
//     S^T = K Q^T, P^T (D from MODE 0), dv += P^T dout; dP^T = V dout^T, dS^T = P^T (dP^T - D),
//     dk += dS^T Q; dk *= scale. dk and dv sum the group's query heads in order, in one workgroup.
// The element-wise work needs each accumulator element's row and column (attention_coop.glsl). Layouts and
// masking (HAS_POS) as attention_backward.comp; shared pieces in attention_coop.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_coop.glsl"
#include "generic_common.glsl"
layout(constant_id = 2) const uint HAS_POS = 0;  // 1: binding 6 holds pos [B, T]
layout(constant_id = 5) const uint MODE = 0;     // 0 dq (and D), 1 dk/dv (3 and 4: attention_coop.glsl)

layout(set = 0, binding = 0) readonly buffer DOb { float dout[]; };
layout(set = 0, binding = 0) readonly buffer DOv { vec4 dout4[]; };
layout(set = 0, binding = 1) readonly buffer Qb { float q[]; };
layout(set = 0, binding = 1) readonly buffer Qv { vec4 q4[]; };
layout(set = 0, binding = 2) readonly buffer Kb { float k[]; };
layout(set = 0, binding = 2) readonly buffer Kv { vec4 k4[]; };
layout(set = 0, binding = 3) readonly buffer Vb { float v[]; };
layout(set = 0, binding = 3) readonly buffer Vv { vec4 v4[]; };
layout(set = 0, binding = 4) readonly buffer Ob { float o[]; };
layout(set = 0, binding = 4) readonly buffer Ov { vec4 o4[]; };
layout(set = 0, binding = 5) readonly buffer Lb { float lse[]; };
layout(set = 0, binding = 6) readonly buffer Pb { int tok_pos[]; };  // a dummy unless HAS_POS
layout(set = 0, binding = 7) writeonly buffer DQb { float dq[]; };
layout(set = 0, binding = 8) writeonly buffer DKb { float dk[]; };
layout(set = 0, binding = 9) writeonly buffer DVb { float dv[]; };
layout(set = 0, binding = 10) readonly buffer Scalars { float scal[]; };
layout(set = 0, binding = 11) buffer Db { float Dr[]; };  // scratch: D of every query row

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nblocks;  // MODE 0: query blocks per (batch, head); MODE 1: key blocks per (batch, kv head)
  uint scale_idx;
} p;

shared float LDs[2u * BR];  // MODE 1: lse and D of the query tile's rows

uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

void dq_block(uint wid, uint sg, uint lane) {
  const uint bh = wid / p.nblocks, qb = p.nblocks - 1u - (wid - bh * p.nblocks);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * AR, nq = min(AR, p.T - t0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint qbase = ((b * p.T + t0) * p.H + h) * p.hd, kbase = (b * p.S * p.KV + g) * p.hd;
  const float scale = scal[p.scale_idx];
  const uint rq = lane >> 2u, cq = 2u * (lane & 3u);
  const uint tq[2] = {t0 + sg * 16u + rq, t0 + sg * 16u + rq + 8u};  // this lane's two queries

  HALF qf[NH_MAX], df[NH_MAX];
  ET_LOAD_F16(0u, AR, q, q4, qbase, qstride, nq, p.hd)
  barrier();
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(qf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  barrier();
  ET_LOAD_F16(0u, AR, dout, dout4, qbase, qstride, nq, p.hd)
  barrier();
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(df[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);

  // D = rowsum(dout * out) in fp32 from the unrounded rows: the quad's lanes every fourth 4-column slot
  // each, all loads issued at once.
  float D[2] = {0.0, 0.0}, L[2] = {0.0, 0.0};
  uint first[2] = {0u, 0u};
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    const uint orow = qbase + (tq[r] - t0) * qstride, nrow = tq[r] < p.T ? 1u : 0u;
    vec4 dv4[(SL + 3u) / 4u], ov4[(SL + 3u) / 4u];
    [[unroll]] for (uint k = 0u; k < (SL + 3u) / 4u; ++k) {
      const uint sl = (lane & 3u) + 4u * k;
      ET_FETCH_SLOT(dv4[k], 0u, sl, dout, dout4, orow, 0u, nrow, p.hd)
      ET_FETCH_SLOT(ov4[k], 0u, sl, o, o4, orow, 0u, nrow, p.hd)
    }
    [[unroll]] for (uint k = 0u; k < (SL + 3u) / 4u; ++k) D[r] += dot(dv4[k], ov4[k]);
    if (tq[r] < p.T) {
      L[r] = lse[(b * p.H + h) * p.T + tq[r]];
      if (HAS_POS == 1u) first[r] = first_key(b, tq[r]);
    }
    D[r] = quad_sum(D[r]);
    if (tq[r] < p.T && (lane & 3u) == 0u) Dr[(b * p.H + h) * p.T + tq[r]] = D[r];
  }

  ACC dqa[NH_MAX];
  [[unroll]] for (uint n = 0u; n < NH; ++n) dqa[n] = ACC(0.0);
  const uint kend = t0 + nq + off;
  uint cbeg = 0u;
  if (HAS_POS == 1u) cbeg = first_of_block(b, t0, nq) / BR * BR;
  const uint VT = BR * KP8;
  vec4 kt[NS_MAX], vt[NS_MAX];  // the next K and V tiles, in flight
  if (cbeg < kend) {
    ET_FETCH_TILE(kt, k, k4, kbase + cbeg * kstride, kstride, p.S - cbeg, p.hd)
    ET_FETCH_TILE(vt, v, v4, kbase + cbeg * kstride, kstride, p.S - cbeg, p.hd)
  }
  for (uint c0 = cbeg; c0 < kend; c0 += BR) {
    barrier();
    ET_PUT_TILE(kt, 0u)
    ET_PUT_TILE(vt, VT)
    barrier();
    const uint cn = c0 + BR;
    if (cn < kend) {
      ET_FETCH_TILE(kt, k, k4, kbase + cn * kstride, kstride, p.S - cn, p.hd)
      ET_FETCH_TILE(vt, v, v4, kbase + cn * kstride, kstride, p.S - cn, p.hd)
    }
    HALF dsf[NB_MAX];
    [[unroll]] for (uint j = 0u; j < NB; ++j) {
      ACC s, dp;
      ET_SCORES(s, qf, 0u, j)
      ET_SCORES(dp, df, VT, j)
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        const uint r = acc_row_half(i), c = c0 + j * 16u + cq + acc_col(i);
        const bool seen = tq[r] < p.T && c < p.S && c <= tq[r] + off && (HAS_POS == 0u || c >= first[r]);
        s[i] = seen ? exp(scale * s[i] - L[r]) * (dp[i] - D[r]) : 0.0;
      }
      dsf[j] = HALF(s);
    }
    ET_TIMES_TILE(dqa, dsf, 0u)
  }
  ET_STORE_ROWS(dqa, scale, sg, lane, dq, qbase + sg * 16u * qstride, qstride, nq > sg * 16u ? nq - sg * 16u : 0u, p.hd)
}

// Whether a query of tile [t0, t0 + BR) sees a key of [c0, cend) (HAS_POS; without it every tile from tbeg
// does). Every invocation reads the same positions: uniform.
bool tile_sees(uint b, uint t0, uint c0, uint cend, uint off) {
  if (HAS_POS == 0u) return true;
  const uint nq = min(BR, p.T - t0);
  for (uint r = 0u; r < nq; ++r)
    if (first_key(b, t0 + r) < cend && t0 + r + off >= c0) return true;
  return false;
}
// The first query tile number >= i that sees a key of the block, or total.
uint next_tile(uint b, uint i, uint ntiles, uint total, uint tbeg, uint c0, uint cend, uint off) {
  while (i < total && !tile_sees(b, tbeg + (i % ntiles) * BR, c0, cend, off)) ++i;
  return i;
}
// Fetches query tile i's Q and dout rows, and (invocations < BR) its lse and D.
#define FETCH_QUERY_TILE(i)                                                                   \
  {                                                                                           \
    const uint h_ = g * G + (i) / ntiles, t_ = tbeg + ((i) % ntiles) * BR, n_ = min(BR, p.T - t_); \
    const uint qb_ = ((b * p.T + t_) * p.H + h_) * p.hd, lb_ = (b * p.H + h_) * p.T + t_;    \
    ET_FETCH_TILE(qt, q, q4, qb_, qstride, n_, p.hd)                                    \
    ET_FETCH_TILE(dt, dout, dout4, qb_, qstride, n_, p.hd)                              \
    const uint r_ = gl_LocalInvocationIndex;                                                  \
    lse_n = r_ < n_ ? lse[lb_ + r_] : 0.0;                                                    \
    D_n = r_ < n_ ? Dr[lb_ + r_] : 0.0;                                                       \
  }

void dkdv_block(uint wid, uint sg, uint lane) {
  const uint G = p.H / p.KV;
  const uint bg = wid / p.nblocks, kb = wid - bg * p.nblocks;  // early (heavy) key blocks first
  const uint b = bg / p.KV, g = bg - b * p.KV;
  const uint c0 = kb * AR, nk = min(AR, p.S - c0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint kbase = ((b * p.S + c0) * p.KV + g) * p.hd;
  const float scale = scal[p.scale_idx];
  const uint rq = lane >> 2u, cq = 2u * (lane & 3u);
  const uint kc[2] = {c0 + sg * 16u + rq, c0 + sg * 16u + rq + 8u};  // this lane's two keys

  HALF kf[NH_MAX], vf[NH_MAX];
  ET_LOAD_F16(0u, AR, k, k4, kbase, kstride, nk, p.hd)
  barrier();
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(kf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  barrier();
  ET_LOAD_F16(0u, AR, v, v4, kbase, kstride, nk, p.hd)
  barrier();
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(vf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);

  ACC dka[NH_MAX], dva[NH_MAX];
  [[unroll]] for (uint n = 0u; n < NH; ++n) {
    dka[n] = ACC(0.0);
    dva[n] = ACC(0.0);
  }
  // Queries t see key c when c <= t + off: the first query tile that sees any key of the block. The query
  // tiles, for every head of the group, are numbered i = hh * ntiles + tile; next_tile() skips the ones
  // (HAS_POS) none of whose queries sees a key of the block.
  const uint tbeg = c0 > off ? (c0 - off) / BR * BR : 0u;
  const uint cend = c0 + nk;  // keys [c0, cend)
  const uint ntiles = tbeg < p.T ? (p.T - tbeg + BR - 1u) / BR : 0u, total = G * ntiles;
  const uint DT = BR * KP8;   // dout's tile follows Q's
  vec4 qt[NS_MAX], dt[NS_MAX];  // the next Q and dout tiles, in flight
  float lse_n = 0.0, D_n = 0.0;                              // and their lse and D (invocations < BR)
  uint i = next_tile(b, 0u, ntiles, total, tbeg, c0, cend, off);
  if (i < total) FETCH_QUERY_TILE(i)
  while (i < total) {
    const uint t0 = tbeg + (i % ntiles) * BR, nq = min(BR, p.T - t0);
    barrier();  // every subgroup is done with the previous tiles
    ET_PUT_TILE(qt, 0u)
    ET_PUT_TILE(dt, DT)
    if (gl_LocalInvocationIndex < BR) {
      LDs[gl_LocalInvocationIndex] = lse_n;
      LDs[BR + gl_LocalInvocationIndex] = D_n;
    }
    barrier();
    i = next_tile(b, i + 1u, ntiles, total, tbeg, c0, cend, off);
    if (i < total) FETCH_QUERY_TILE(i)
    // P^T: this subgroup's 16 keys x BR queries (columns), then dv += P^T dout.
    ACC pt[NB_MAX];
    HALF pf[NB_MAX];
    [[unroll]] for (uint j = 0u; j < NB; ++j) {
      ET_SCORES(pt[j], kf, 0u, j)
      [[unroll]] for (uint e = 0u; e < 8u; ++e) {
        const uint r = acc_row_half(e), tj = j * 16u + cq + acc_col(e), t = t0 + tj;
        const bool seen = tj < nq && kc[r] < p.S && kc[r] <= t + off && (HAS_POS == 0u || kc[r] >= first_key(b, t));
        pt[j][e] = seen ? exp(scale * pt[j][e] - LDs[tj]) : 0.0;
      }
      pf[j] = HALF(pt[j]);
    }
    ET_TIMES_TILE(dva, pf, DT)
    // dS^T = P^T (dP^T - D) with dP^T = V dout^T, then dk += dS^T Q.
    [[unroll]] for (uint j = 0u; j < NB; ++j) {
      ACC dpt;
      ET_SCORES(dpt, vf, DT, j)
      [[unroll]] for (uint e = 0u; e < 8u; ++e) pt[j][e] *= dpt[e] - LDs[BR + j * 16u + cq + acc_col(e)];
      pf[j] = HALF(pt[j]);
    }
    ET_TIMES_TILE(dka, pf, 0u)
  }
  const uint nrows = nk > sg * 16u ? nk - sg * 16u : 0u, rbase = kbase + sg * 16u * kstride;
  ET_STORE_ROWS(dka, scale, sg, lane, dk, rbase, kstride, nrows, p.hd)
  ET_STORE_ROWS(dva, 1.0, sg, lane, dv, rbase, kstride, nrows, p.hd)
}

void main() {
  const uint wid = et_group();
  if (wid >= (MODE == 0u ? p.B * p.H : p.B * p.KV) * p.nblocks) return;  // uniform per workgroup
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  if (MODE == 0u) dq_block(wid, sg, lane);
  else dkdv_block(wid, sg, lane);
}
