// Causal attention forward on the tensor cores (the f16 flag: fp16 q, k, v and probabilities, fp32 scores,
// softmax state and output), flash-attention style: one workgroup per (batch, query head, block of 64
// queries), heavy (late) blocks first. Each subgroup keeps its 16 query rows as fp16 fragments; per tile of
// BR keys: S = Q K^T on the tensor cores, to the stage; each lane masks and scales its half row, the pair
// of lanes of a row merges the max, and the online softmax rescales the lane's output columns; P =
// exp(s - m) goes back as fp16 and P V comes through the stage, CW columns at a time, into the lane's
// output registers. Layouts, masking (HAS_POS) and outputs as attention.comp; shared pieces in
// attention_coop.glsl.
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
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, row = lane & 15u, hf = lane >> 4;
  const uint bh = wid / p.nqb, qb = p.nqb - 1u - (wid - bh * p.nqb);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * AR, nq = min(AR, p.T - t0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint qbase = ((b * p.T + t0) * p.H + h) * p.hd, kbase = (b * p.S * p.KV + g) * p.hd;
  const float scale = scal[p.scale_idx];
  const uint t = t0 + sg * 16u + row;  // this lane's query (past T for the padding rows of the last block)

  ET_LOAD_F16(0u, AR, q, q4, qbase, qstride, nq, p.hd)
  barrier();
  HALF qf[NH_MAX];
  [[unroll]] for (uint kk = 0u; kk < NH; ++kk) coopMatLoadNV(qf[kk], Ts, sg * 16u * KP8 + kk * 2u, KP8, false);

  float m = -ET_INF, l = 0.0;
  float acc[HALF_MAX];  // this lane's output columns: in pass c0 of CW columns, c0 + hf * CW/2 + i
  [[unroll]] for (uint i = 0u; i < HC / 2u; ++i) acc[i] = 0.0;
  const uint kend = t0 + nq + off;  // keys [0, kend) are seen by some query of the block
  uint first = 0u, cbeg = 0u;
  if (HAS_POS == 1u) {
    first = t < p.T ? first_key(b, t) : 0u;
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
    ET_SCORES_TO_STAGE(qf, 0u, sg)
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // Scale and mask this lane's half row (future keys, keys past S, keys before the sample: -inf).
    float x[32];
    float tmax = -ET_INF;
    [[unroll]] for (uint j4 = 0u; j4 < BR / 8u; ++j4) {
      const vec4 s4 = stage4(sg, row, hf * (BR / 2u) + 4u * j4);
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        const uint j = 4u * j4 + e, c = c0 + hf * (BR / 2u) + j;
        const bool seen = c < p.S && c <= t + off && (HAS_POS == 0u || c >= first);
        x[j] = seen ? scale * s4[e] : -ET_INF;
        tmax = max(tmax, x[j]);
      }
    }
    // Tile 0 holds key 0, which every query sees: from then on m is finite. Under HAS_POS a row's first
    // tiles may hold none of its keys (mn = -inf): they add exp(-inf - 0) = 0.
    const float mn = max(m, max(tmax, subgroupShuffleXor(tmax, 16u)));
    const float alpha = m == mn ? 1.0 : exp(m - mn);
    const float mz = HAS_POS == 1u && mn == -ET_INF ? 0.0 : mn;
    float sum = 0.0;
    [[unroll]] for (uint j = 0u; j < BR / 2u; ++j) {
      x[j] = exp(x[j] - mz);  // exp(-inf) = 0 for masked keys
      sum += x[j];
    }
    l = l * alpha + (sum + subgroupShuffleXor(sum, 16u));
    m = mn;
    [[unroll]] for (uint i = 0u; i < HC / 2u; ++i) acc[i] *= alpha;
    ET_STORE_P(x, sg, row, hf)
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // O += P V, CW columns at a time through the stage.
    HALF pf[NB_MAX];
    [[unroll]] for (uint kb = 0u; kb < NB; ++kb) coopMatLoadNV(pf[kb], Ps, p_at(sg) + kb * 2u, PP8, false);
    [[unroll]] for (uint cc = 0u; cc < HC; cc += CW) {
      [[unroll]] for (uint n = 0u; n < CW / 16u; ++n) {
        ACC pv = ACC(0.0);
        [[unroll]] for (uint kb = 0u; kb < NB; ++kb) {
          HALF vf;
          coopMatLoadNV(vf, Ts, VT + kb * 16u * KP8 + (cc / 16u + n) * 2u, KP8, false);
          pv = coopMatMulAddNV(pf[kb], vf, pv);
        }
        coopMatStoreNV(pv, stage, stage_at(sg) + n * 4u, SP4, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint i4 = 0u; i4 < CW / 8u; ++i4) {
        const vec4 pv4 = stage4(sg, row, hf * (CW / 2u) + 4u * i4);
        [[unroll]] for (uint e = 0u; e < 4u; ++e) acc[cc / 2u + 4u * i4 + e] += pv4[e];
      }
      subgroupBarrier();  // the stage is read before the next pass (or tile) overwrites it
    }
  }
  if (t < p.T) {
    const float inv = 1.0 / l;
    const uint orow = qbase + (sg * 16u + row) * qstride;
    [[unroll]] for (uint cc = 0u; cc < HC; cc += CW)
      [[unroll]] for (uint i = 0u; i < CW / 2u; ++i) {
        const uint c = cc + hf * (CW / 2u) + i;
        if (c < p.hd) o[orow + c] = acc[cc / 2u + i] * inv;
      }
    if (hf == 0u) lse[(b * p.H + h) * p.T + t] = m + log(l);
  }
}
