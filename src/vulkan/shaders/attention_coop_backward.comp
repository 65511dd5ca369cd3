// Causal attention backward on the tensor cores (the f16 flag: fp16 q, k, v, dout, P and dS, fp32 scores,
// D, softmax and gradient sums), flash-attention-2 style without atomics, as attention_backward.comp: P is
// recomputed from q, k and the forward's lse. Two dispatches (with B16 after the fp16 copies of
// attention_coop_copy16.comp, below):
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
layout(set = 0, binding = 11) buffer Db { float Dr[]; };  // pooled scratch: D of every query row, then
layout(set = 0, binding = 11) buffer S16 { uvec4 s16[]; };  // B16's copies of q, dout, k and v

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nblocks;  // MODE 0: query blocks per (batch, head); MODE 1: key blocks per (batch, kv head)
  uint scale_idx;
  uint q16, d16, k16, v16;  // B16: uvec4 offsets of the fp16 copies in s16
} p;

shared float LDs[2u * BR];  // MODE 1: lse and D of the query tile's rows

// B16 (constant 6): the B tiles come from fp16 copies of their rows in the pooled scratch
// (s16), made first by attention_coop_copy16.comp: slots of 8
// head-dim columns, one 16-byte load and one 16-byte store into Ts each, half the bytes of the fp32 rows,
// and, in the registers that hold one fp32 tile, two tiles in flight. Taken where hd % 8 == 0
// (ops_llama.cpp). Measured on an H200 (docs/PERFORMANCE.md): the backward at B4 H32 T1024 D64 1.193 ->
// 1.045 ms; the forward, whose copies cost more than its fp32 tiles did, kept them.
layout(constant_id = 6) const uint B16 = 0;
const uint SL8 = HC / 8u;                                          // 8-column slots per row
const uint NS16 = (BR * SL8 + 127u) / 128u, NS16_MAX = 4u;         // per invocation, of a B tile
const uint AHEAD = B16 == 1u ? 2u : 1u;                            // B tiles in flight
// x = the fp16 copy's slots of a B tile: rows at uvec4 base8 + r * stride8, zeros past the head dim hd and
// for rows r >= nvalid.
#define ET_FETCH16_TILE(x, base8, stride8, nvalid, hd)                                        \
  [[unroll]] for (uint k_ = 0u; k_ < NS16; ++k_) {                                           \
    const uint e_ = gl_LocalInvocationIndex + 128u * k_, r_ = e_ / SL8, s_ = e_ - r_ * SL8;   \
    x[k_] = uvec4(0u);                                                                        \
    if (r_ < min(nvalid, BR) && 8u * s_ < (hd)) x[k_] = s16[(base8) + r_ * (stride8) + s_];   \
  }
#define ET_PUT16_TILE(x, at)                                                                  \
  [[unroll]] for (uint k_ = 0u; k_ < NS16; ++k_) {                                           \
    const uint e_ = gl_LocalInvocationIndex + 128u * k_, r_ = e_ / SL8, s_ = e_ - r_ * SL8;   \
    if (r_ < BR) Ts[(at) + r_ * KP8 + s_] = x[k_];                                            \
  }
// The K and V tiles in flight for dq: fp32 rows kt, vt; or with B16 fp16 slots, two
// tiles by turns (set 0: k0h, v0h; set 1: k1h, v1h). ET_FETCH_KV(c, set) requests the tile of keys from c
// (rows kbase + c * kstride of k and v; copies at p.k16 and p.v16); ET_PUT_KV(set) puts a set into Ts (K at
// 0, V at VT).
#define ET_KV_REGS vec4 kt[NS_MAX], vt[NS_MAX]; uvec4 k0h[NS16_MAX], v0h[NS16_MAX], k1h[NS16_MAX], v1h[NS16_MAX];
#define ET_FETCH_KV(c, set)                                                                   \
  if (B16 == 1u) {                                                                            \
    const uint b8_ = (kbase + (c) * kstride) / 8u, s8_ = kstride / 8u;                        \
    if ((set) == 0u) {                                                                        \
      ET_FETCH16_TILE(k0h, p.k16 + b8_, s8_, p.S - (c), p.hd)                                  \
      ET_FETCH16_TILE(v0h, p.v16 + b8_, s8_, p.S - (c), p.hd)                                  \
    } else {                                                                                  \
      ET_FETCH16_TILE(k1h, p.k16 + b8_, s8_, p.S - (c), p.hd)                                  \
      ET_FETCH16_TILE(v1h, p.v16 + b8_, s8_, p.S - (c), p.hd)                                  \
    }                                                                                         \
  } else {                                                                                    \
    ET_FETCH_TILE(kt, k, k4, kbase + (c) * kstride, kstride, p.S - (c), p.hd)                 \
    ET_FETCH_TILE(vt, v, v4, kbase + (c) * kstride, kstride, p.S - (c), p.hd)                 \
  }
#define ET_PUT_KV(set)                                                                        \
  if (B16 == 1u) {                                                                            \
    if ((set) == 0u) {                                                                        \
      ET_PUT16_TILE(k0h, 0u)                                                                  \
      ET_PUT16_TILE(v0h, VT)                                                                  \
    } else {                                                                                  \
      ET_PUT16_TILE(k1h, 0u)                                                                  \
      ET_PUT16_TILE(v1h, VT)                                                                  \
    }                                                                                         \
  } else {                                                                                    \
    ET_PUT_TILE(kt, 0u)                                                                       \
    ET_PUT_TILE(vt, VT)                                                                       \
  }

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

  // The block's Q, dout and out rows and its lse are requested at once (one wait for memory where the
  // rows were loaded one after another); the first K and V tiles as soon as those are in place.
  vec4 qx[NA_MAX], dx[NA_MAX], ox[NA_MAX];
  ET_FETCH_ROWS(qx, AR, q, q4, qbase, qstride, nq, p.hd)
  ET_FETCH_ROWS(dx, AR, dout, dout4, qbase, qstride, nq, p.hd)
  ET_FETCH_ROWS(ox, AR, o, o4, qbase, qstride, nq, p.hd)
  float D[2] = {0.0, 0.0}, L[2] = {0.0, 0.0};
  uint first[2] = {0u, 0u};
  [[unroll]] for (uint r = 0u; r < 2u; ++r)
    if (tq[r] < p.T) {
      L[r] = lse[(b * p.H + h) * p.T + tq[r]];
      if (HAS_POS == 1u) first[r] = first_key(b, tq[r]);
    }
  // D = rowsum(dout * out) in fp32 from the unrounded rows: each invocation's slots' dot products go to
  // the (not yet used) stage, summed per row in slot order below.
  [[unroll]] for (uint k_ = 0u; k_ < (AR * SL + 127u) / 128u; ++k_) {
    const uint e_ = gl_LocalInvocationIndex + 128u * k_;
    if (e_ < AR * SL) stage[e_ / 4u][e_ % 4u] = floatBitsToUint(dot(dx[k_], ox[k_]));
  }
  // Q, and dout beside it where two A tiles fit (2 BR >= 2 AR), else after it.
  const bool both = BR >= AR;
  ET_PUT_ROWS(qx, AR, 0u)
  if (both) ET_PUT_ROWS(dx, AR, AR * KP8)
  const uint kend = t0 + nq + off;
  uint cbeg = 0u;
  if (HAS_POS == 1u) cbeg = first_of_block(b, t0, nq) / BR * BR;
  const uint VT = BR * KP8;
  ET_KV_REGS  // the next K and V tiles (AHEAD of them), in flight
  if (cbeg < kend) ET_FETCH_KV(cbeg, 0u)
  if (AHEAD == 2u && cbeg + BR < kend) ET_FETCH_KV(cbeg + BR, 1u)
  barrier();
  HALF qf[NH_MAX], df[NH_MAX];
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(qf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  if (both)
    [[unroll]] for (uint kk = 0u; kk < NH; ++kk)
      coopMatLoadNV(df[kk], Ts, (AR + sg * 16u) * KP8 + kk * 2u, KP8, false);
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    const uint row = sg * 16u + rq + 8u * r;
    for (uint sl = 0u; sl < SL; ++sl) D[r] += uintBitsToFloat(stage[(row * SL + sl) / 4u][(row * SL + sl) % 4u]);
    if (tq[r] < p.T && (lane & 3u) == 0u) Dr[(b * p.H + h) * p.T + tq[r]] = D[r];
  }
  if (!both) {
    barrier();
    ET_PUT_ROWS(dx, AR, 0u)
    barrier();
    [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(df[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  }

  ACC dqa[NH_MAX];
  [[unroll]] for (uint n = 0u; n < NH; ++n) dqa[n] = ACC(0.0);
  uint turn = 0u;  // the register set to put next (B16; else always 0)
  for (uint c0 = cbeg; c0 < kend; c0 += BR) {
    barrier();
    ET_PUT_KV(turn)
    barrier();
    const uint cn = c0 + AHEAD * BR;
    if (cn < kend) ET_FETCH_KV(cn, turn)
    turn ^= AHEAD - 1u;
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
  return HAS_POS == 0u || block_sees(b, t0, min(BR, p.T - t0), c0, cend, off);
}
// The first query tile number >= i that sees a key of the block, or total.
uint next_tile(uint b, uint i, uint ntiles, uint total, uint tbeg, uint c0, uint cend, uint off) {
  while (i < total && !tile_sees(b, tbeg + (i % ntiles) * BR, c0, cend, off)) ++i;
  return i;
}
// Requests query tile i's Q and dout rows, and (invocations < BR) its lse and D, into register set `set`
// (as ET_FETCH_KV: fp32 rows qt, dt, or with B16 fp16 slots q0h, d0h or q1h, d1h; lse and D in ls0, D0 or
// ls1, D1); PUT_QUERY_TILE(set) puts a set into Ts (Q at 0, dout at DT) and LDs.
#define FETCH_QUERY_TILE(i, set)                                                              \
  {                                                                                           \
    const uint h_ = g * G + (i) / ntiles, t_ = tbeg + ((i) % ntiles) * BR, n_ = min(BR, p.T - t_); \
    const uint qb_ = ((b * p.T + t_) * p.H + h_) * p.hd, lb_ = (b * p.H + h_) * p.T + t_;    \
    const uint r_ = gl_LocalInvocationIndex;                                                  \
    const float l_ = r_ < n_ ? lse[lb_ + r_] : 0.0, d_ = r_ < n_ ? Dr[lb_ + r_] : 0.0;        \
    if (B16 == 1u) {                                                                          \
      if ((set) == 0u) {                                                                      \
        ET_FETCH16_TILE(q0h, p.q16 + qb_ / 8u, qstride / 8u, n_, p.hd)                         \
        ET_FETCH16_TILE(d0h, p.d16 + qb_ / 8u, qstride / 8u, n_, p.hd)                         \
      } else {                                                                                \
        ET_FETCH16_TILE(q1h, p.q16 + qb_ / 8u, qstride / 8u, n_, p.hd)                         \
        ET_FETCH16_TILE(d1h, p.d16 + qb_ / 8u, qstride / 8u, n_, p.hd)                         \
      }                                                                                       \
    } else {                                                                                  \
      ET_FETCH_TILE(qt, q, q4, qb_, qstride, n_, p.hd)                                        \
      ET_FETCH_TILE(dt, dout, dout4, qb_, qstride, n_, p.hd)                                  \
    }                                                                                         \
    if ((set) == 0u) {                                                                        \
      ls0 = l_;                                                                               \
      D0 = d_;                                                                                \
    } else {                                                                                  \
      ls1 = l_;                                                                               \
      D1 = d_;                                                                                \
    }                                                                                         \
  }
#define PUT_QUERY_TILE(set)                                                                   \
  if (B16 == 1u) {                                                                            \
    if ((set) == 0u) {                                                                        \
      ET_PUT16_TILE(q0h, 0u)                                                                  \
      ET_PUT16_TILE(d0h, DT)                                                                  \
    } else {                                                                                  \
      ET_PUT16_TILE(q1h, 0u)                                                                  \
      ET_PUT16_TILE(d1h, DT)                                                                  \
    }                                                                                         \
  } else {                                                                                    \
    ET_PUT_TILE(qt, 0u)                                                                       \
    ET_PUT_TILE(dt, DT)                                                                       \
  }                                                                                           \
  if (gl_LocalInvocationIndex < BR) {                                                         \
    LDs[gl_LocalInvocationIndex] = (set) == 0u ? ls0 : ls1;                                   \
    LDs[BR + gl_LocalInvocationIndex] = (set) == 0u ? D0 : D1;                                \
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

  // Queries t see key c when c <= t + off: the first query tile that sees any key of the block. The query
  // tiles, for every head of the group, are numbered i = hh * ntiles + tile; next_tile() skips the ones
  // (HAS_POS) none of whose queries sees a key of the block.
  const uint tbeg = c0 > off ? (c0 - off) / BR * BR : 0u;
  const uint cend = c0 + nk;  // keys [c0, cend)
  const uint ntiles = tbeg < p.T ? (p.T - tbeg + BR - 1u) / BR : 0u, total = G * ntiles;
  const uint DT = BR * KP8;   // dout's tile follows Q's
  // The block's K and V rows and the first query tile are requested at once (one wait for memory where
  // the rows were loaded one after another).
  vec4 kx[NA_MAX], vx[NA_MAX];
  ET_FETCH_ROWS(kx, AR, k, k4, kbase, kstride, nk, p.hd)
  ET_FETCH_ROWS(vx, AR, v, v4, kbase, kstride, nk, p.hd)
  // The next query tiles (AHEAD of them), in flight: tile i, then tile i2.
  vec4 qt[NS_MAX], dt[NS_MAX];
  uvec4 q0h[NS16_MAX], d0h[NS16_MAX], q1h[NS16_MAX], d1h[NS16_MAX];
  float ls0 = 0.0, D0 = 0.0, ls1 = 0.0, D1 = 0.0;
  uint i = next_tile(b, 0u, ntiles, total, tbeg, c0, cend, off);
  uint i2 = i < total ? next_tile(b, i + 1u, ntiles, total, tbeg, c0, cend, off) : total;
  if (i < total) FETCH_QUERY_TILE(i, 0u)
  if (AHEAD == 2u && i2 < total) FETCH_QUERY_TILE(i2, 1u)
  // K, and V beside it where two A tiles fit (2 BR >= 2 AR), else after it.
  const bool both = BR >= AR;
  ET_PUT_ROWS(kx, AR, 0u)
  if (both) ET_PUT_ROWS(vx, AR, AR * KP8)
  barrier();
  HALF kf[NH_MAX], vf[NH_MAX];
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(kf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  if (both)
    [[unroll]] for (uint kk = 0u; kk < NH; ++kk)
      coopMatLoadNV(vf[kk], Ts, (AR + sg * 16u) * KP8 + kk * 2u, KP8, false);
  else {
    barrier();
    ET_PUT_ROWS(vx, AR, 0u)
    barrier();
    [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(vf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);
  }

  ACC dka[NH_MAX], dva[NH_MAX];
  [[unroll]] for (uint n = 0u; n < NH; ++n) {
    dka[n] = ACC(0.0);
    dva[n] = ACC(0.0);
  }
  uint turn = 0u;  // the register set to put next (B16; else always 0)
  while (i < total) {
    const uint t0 = tbeg + (i % ntiles) * BR, nq = min(BR, p.T - t0);
    barrier();  // every subgroup is done with the previous tiles
    PUT_QUERY_TILE(turn)
    barrier();
    // Request the tile AHEAD after i (i2, or the one after i2), into the set just put.
    const uint f = AHEAD == 2u && i2 < total ? next_tile(b, i2 + 1u, ntiles, total, tbeg, c0, cend, off) : i2;
    if (f < total) FETCH_QUERY_TILE(f, turn)
    i = i2;
    i2 = AHEAD == 2u ? f : i2 < total ? next_tile(b, i2 + 1u, ntiles, total, tbeg, c0, cend, off) : total;
    turn ^= AHEAD - 1u;
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
