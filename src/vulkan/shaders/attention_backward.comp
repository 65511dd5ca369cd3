// Causal attention backward, flash-attention-2 style without atomics (deterministic): the probabilities
// are recomputed from q, k and the forward's lse, never stored. Two dispatches:
//   MODE 0, dq: one workgroup per (batch, query head, block of AR queries). Writes D = rowsum(dout * out)
//     of its rows to the scratch buffer, then per tile of BR keys: dP = dout V^T (V in the K/V tile), then
//     S = Q K^T (K in the same tile), P = exp(scale S - lse), dS = P (dP - D), dq += dS K; dq *= scale.
//   MODE 1, dk/dv: one workgroup per (batch, kv head, block of AR keys), which keeps its K and V rows and
//     walks every query head of its group and every block of BR queries that sees a key of the block:
//     S^T = K Q^T, dP^T = V dout^T, P^T and dS^T as above (D from MODE 0), dv += P^T dout, dk += dS^T Q;
//     dk *= scale. So dk and dv sum the group's query heads in order, in one workgroup.
// Layouts as attention.comp; dout, out, dq [B,T,H,hd]; dk, dv [B,S,KV,hd]; D (scratch) [B,H,T].
// HAS_POS (sample packing, S == T) masks as attention.comp: query t sees keys [first(t), t]. dq starts its
// key loop at the tile of its block's smallest first(); dk/dv skips every query block none of whose
// queries sees a key of its key block (all of their samples start after it).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_tiles.glsl"
#include "generic_common.glsl"
layout(constant_id = 6) const uint MODE = 0;  // 0 dq (and D), 1 dk/dv
layout(constant_id = 7) const uint HAS_POS = 0;  // 1: binding 6 holds pos [B, T]

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
layout(set = 0, binding = 7) writeonly buffer DQv { vec4 dq4[]; };
layout(set = 0, binding = 8) writeonly buffer DKb { float dk[]; };
layout(set = 0, binding = 8) writeonly buffer DKv { vec4 dk4[]; };
layout(set = 0, binding = 9) writeonly buffer DVb { float dv[]; };
layout(set = 0, binding = 9) writeonly buffer DVv { vec4 dv4[]; };
layout(set = 0, binding = 10) readonly buffer Scalars { float scal[]; };
layout(set = 0, binding = 11) buffer Db { float Dr[]; };  // scratch: D of every query row

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nblocks;  // MODE 0: query blocks per (batch, head); MODE 1: key blocks per (batch, kv head)
  uint scale_idx;
} p;

// A tiles (MODE 0: Q at 0 and dout at AR*HC4; MODE 1: K and V), B tiles (MODE 0: V then K in one tile;
// MODE 1: Q at 0 and dout at BR*HC4), and the score tile (dS; MODE 1: P^T, then dS^T).
shared vec4 As[2u * AR * HC4];
shared vec4 Bs[(1u + MODE) * BR * HC4];
shared vec4 Xs[AR * BR4];

// The first key query t of sequence b sees under HAS_POS (first_of_block: attention_tiles.glsl).
uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

void dq_block(uint wid, uint tx, uint ty) {
  const uint bh = wid / p.nblocks, qb = p.nblocks - 1u - (wid - bh * p.nblocks);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * AR, nq = min(AR, p.T - t0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint qbase = ((b * p.T + t0) * p.H + h) * p.hd, kbase = (b * p.S * p.KV + g) * p.hd;
  const uint lbase = (b * p.H + h) * p.T + t0, DO = AR * HC4;
  const float scale = scal[p.scale_idx];
  const uint hd4 = (p.hd + 3u) / 4u;
  ET_LOAD_TILE(As, 0u, AR, q, q4, qbase, qstride, nq, p.hd)
  ET_LOAD_TILE(As, DO, AR, dout, dout4, qbase, qstride, nq, p.hd)
  barrier();
  // D = rowsum(dout * out): partial dots over this invocation's slots, summed across the row.
  float D[RI_MAX], L[RI_MAX];
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    const uint r = ty + TY * i;
    D[i] = 0.0;
    L[i] = r < nq ? lse[lbase + r] : 0.0;
    [[unroll]] for (uint d = 0u; d < DQ; ++d) {
      const uint slot = tx + TX * d;
      if (r >= nq || slot >= hd4) continue;
      const uint ob = qbase + r * qstride + 4u * slot;
      vec4 ov = vec4(0.0);
      if (p.hd % 4u == 0u) {
        ov = o4[ob >> 2];
      } else {
        [[unroll]] for (uint c = 0u; c < 4u; ++c) if (4u * slot + c < p.hd) ov[c] = o[ob + c];
      }
      D[i] += dot(As[DO + hd_at(r, slot)], ov);
    }
  }
  ET_ROW_SHARE(Xs, D)
  barrier();
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    const uint r = ty + TY * i;
    D[i] = ET_ROW_SUM(Xs, r);
    if (tx == 0u && r < nq) Dr[lbase + r] = D[i];
  }
  vec4 acc[RI_MAX * DQ_MAX];
  [[unroll]] for (uint i = 0u; i < RI * DQ_MAX; ++i) acc[i] = vec4(0.0);
  const uint kend = t0 + nq + off;  // keys [0, kend) are seen by some query of the block
  uint first[RI_MAX], cbeg = 0u;
  if (HAS_POS == 1u) {
    [[unroll]] for (uint i = 0u; i < RI; ++i) {
      const uint t = t0 + ty + TY * i;
      first[i] = t < p.T ? first_key(b, t) : 0u;
    }
    cbeg = first_of_block(b, t0, nq) / BR * BR;
  }
  for (uint c0 = cbeg; c0 < kend; c0 += BR) {
    const uint nk = min(BR, p.S - c0);
    barrier();  // the previous tile's (or the D sums') readers of Bs and Xs are done
    ET_LOAD_TILE(Bs, 0u, BR, v, v4, kbase + c0 * kstride, kstride, nk, p.hd)
    barrier();
    float dp[RI_MAX * KJ_MAX], s[RI_MAX * KJ_MAX];
    [[unroll]] for (uint i = 0u; i < RI * KJ_MAX; ++i) {
      dp[i] = 0.0;
      s[i] = 0.0;
    }
    ET_DOT_TILES(dp, As, DO, Bs, 0u)
    barrier();
    ET_LOAD_TILE(Bs, 0u, BR, k, k4, kbase + c0 * kstride, kstride, nk, p.hd)
    barrier();
    ET_DOT_TILES(s, As, 0u, Bs, 0u)
    [[unroll]] for (uint i = 0u; i < RI; ++i) {
      const uint t = t0 + ty + TY * i;
      [[unroll]] for (uint j = 0u; j < KJ; ++j) {
        const uint c = c0 + tx + TX * j;
        const bool seen = t < p.T && c < p.S && c <= t + off && (HAS_POS == 0u || c >= first[i]);
        const float pr = seen ? exp(scale * s[i * KJ_MAX + j] - L[i]) : 0.0;
        Xs[p_at(ty + TY * i, (tx >> 2) + 4u * j)][tx & 3u] = pr * (dp[i * KJ_MAX + j] - D[i]);
      }
    }
    barrier();
    ET_PV_TILES(acc, Xs, Bs, 0u)
  }
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    const uint r = ty + TY * i;
    if (r >= nq) continue;
    [[unroll]] for (uint d = 0u; d < DQ; ++d) {
      const uint slot = tx + TX * d;
      if (slot < hd4) { ET_STORE_SLOT(dq, dq4, qbase + r * qstride + 4u * slot, slot, acc[i * DQ_MAX + d] * scale, p.hd) }
    }
  }
}

void dkdv_block(uint wid, uint tx, uint ty) {
  const uint bg = wid / p.nblocks, kb = wid - bg * p.nblocks;
  const uint b = bg / p.KV, g = bg - b * p.KV, G = p.H / p.KV;
  const uint c0 = kb * AR, nk = min(AR, p.S - c0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint kbase = ((b * p.S + c0) * p.KV + g) * p.hd, VO = AR * HC4, DO = BR * HC4;
  const float scale = scal[p.scale_idx];
  const uint hd4 = (p.hd + 3u) / 4u;
  ET_LOAD_TILE(As, 0u, AR, k, k4, kbase, kstride, nk, p.hd)
  ET_LOAD_TILE(As, VO, AR, v, v4, kbase, kstride, nk, p.hd)
  vec4 ak[RI_MAX * DQ_MAX], av[RI_MAX * DQ_MAX];
  [[unroll]] for (uint i = 0u; i < RI * DQ_MAX; ++i) {
    ak[i] = vec4(0.0);
    av[i] = vec4(0.0);
  }
  // Query t sees key c0 from t = c0 - off on: the blocks of BR queries from the one holding it.
  const uint tfirst = (c0 > off ? c0 - off : 0u) / BR * BR;
  for (uint h = g * G; h < g * G + G; ++h) {
    const uint lbase = (b * p.H + h) * p.T;
    for (uint t0 = tfirst; t0 < p.T; t0 += BR) {
      const uint nq = min(BR, p.T - t0), qbase = ((b * p.T + t0) * p.H + h) * p.hd;
      if (HAS_POS == 1u && first_of_block(b, t0, nq) >= c0 + nk) continue;  // uniform: no query sees the keys
      barrier();  // the previous block's readers of Bs and Xs are done
      ET_LOAD_TILE(Bs, 0u, BR, q, q4, qbase, qstride, nq, p.hd)
      ET_LOAD_TILE(Bs, DO, BR, dout, dout4, qbase, qstride, nq, p.hd)
      barrier();
      float s[RI_MAX * KJ_MAX], dp[RI_MAX * KJ_MAX];
      [[unroll]] for (uint i = 0u; i < RI * KJ_MAX; ++i) {
        s[i] = 0.0;
        dp[i] = 0.0;
      }
      ET_DOT_TILES(s, As, 0u, Bs, 0u)    // K . Q
      ET_DOT_TILES(dp, As, VO, Bs, DO)   // V . dout
      float L[KJ_MAX], D[KJ_MAX];
      uint first[KJ_MAX];
      [[unroll]] for (uint j = 0u; j < KJ; ++j) {
        const uint t = t0 + tx + TX * j;
        L[j] = t < p.T ? lse[lbase + t] : 0.0;
        D[j] = t < p.T ? Dr[lbase + t] : 0.0;
        if (HAS_POS == 1u) first[j] = t < p.T ? first_key(b, t) : 0u;
      }
      [[unroll]] for (uint i = 0u; i < RI; ++i) {
        const uint c = c0 + ty + TY * i;
        [[unroll]] for (uint j = 0u; j < KJ; ++j) {
          const uint t = t0 + tx + TX * j;
          const bool seen = t < p.T && c < p.S && c <= t + off && (HAS_POS == 0u || c >= first[j]);
          const float pr = seen ? exp(scale * s[i * KJ_MAX + j] - L[j]) : 0.0;
          s[i * KJ_MAX + j] = pr;
          dp[i * KJ_MAX + j] = pr * (dp[i * KJ_MAX + j] - D[j]);
          Xs[p_at(ty + TY * i, (tx >> 2) + 4u * j)][tx & 3u] = pr;
        }
      }
      barrier();
      ET_PV_TILES(av, Xs, Bs, DO)  // dv += P^T dout
      barrier();
      [[unroll]] for (uint i = 0u; i < RI; ++i)
        [[unroll]] for (uint j = 0u; j < KJ; ++j) Xs[p_at(ty + TY * i, (tx >> 2) + 4u * j)][tx & 3u] = dp[i * KJ_MAX + j];
      barrier();
      ET_PV_TILES(ak, Xs, Bs, 0u)  // dk += dS^T q
    }
  }
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    const uint r = ty + TY * i;
    if (r >= nk) continue;
    [[unroll]] for (uint d = 0u; d < DQ; ++d) {
      const uint slot = tx + TX * d, at = kbase + r * kstride + 4u * slot;
      if (slot < hd4) {
        ET_STORE_SLOT(dk, dk4, at, slot, ak[i * DQ_MAX + d] * scale, p.hd)
        ET_STORE_SLOT(dv, dv4, at, slot, av[i * DQ_MAX + d], p.hd)
      }
    }
  }
}

void main() {
  const uint wid = et_group();
  const uint n = MODE == 0u ? p.B * p.H * p.nblocks : p.B * p.KV * p.nblocks;
  if (wid >= n) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex, tx = tid % TX, ty = tid / TX;
  if (MODE == 0u) dq_block(wid, tx, ty);
  else dkdv_block(wid, tx, ty);
}
