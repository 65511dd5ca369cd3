// Causal attention forward, flash-attention style: one workgroup per (batch, query head, block of AR
// queries), heavy (late) blocks first. The query block stays in workgroup memory; key tiles of BR keys
// stream through one K/V tile (K for the scores, then V in the same memory), and an online softmax keeps
// per row the running max m, the running sum l of exp(s - m) (each invocation over its own keys, summed at
// the end) and the output rows, rescaled when m grows. No score matrix beyond AR x BR exists.
// Layouts (the reference's): q, out [B,T,H,hd]; k, v [B,S,KV,hd]; lse [B,H,T]; query t sees keys
// j <= t + S - T of kv head h / (H / KV). Writes out = sum_j p_j v_j / l and lse = m + log(l).
// HAS_POS (sample packing, S == T): query t sees keys [first(t), t] only, first(t) = t - clamp(pos[b,t], 0, t);
// the key loop starts at the tile holding the smallest first() of the block (earlier tiles hold no key any
// of its queries sees), and a row whose keys in a tile all lie before its sample gets weight 0 there.
// Without it (a specialization) the kernel is the plain causal one.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention_tiles.glsl"
#include "generic_common.glsl"
layout(constant_id = 6) const uint HAS_POS = 0;  // 1: binding 3 holds pos [B, T]

layout(set = 0, binding = 0) readonly buffer Qb { float q[]; };
layout(set = 0, binding = 0) readonly buffer Qv { vec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer Kb { float k[]; };
layout(set = 0, binding = 1) readonly buffer Kv { vec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer Vb { float v[]; };
layout(set = 0, binding = 2) readonly buffer Vv { vec4 v4[]; };
layout(set = 0, binding = 3) readonly buffer Pb { int tok_pos[]; };  // a dummy unless HAS_POS
layout(set = 0, binding = 4) writeonly buffer Ob { float o[]; };
layout(set = 0, binding = 4) writeonly buffer Ov { vec4 o4[]; };
layout(set = 0, binding = 5) writeonly buffer Lb { float lse[]; };
layout(set = 0, binding = 6) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nqb;  // query blocks per (batch, head)
  uint scale_idx;
} p;

shared vec4 Qs[AR * HC4];
shared vec4 KVs[BR * HC4];
shared vec4 Ps[AR * BR4];

// The first key query t of sequence b sees under HAS_POS.
uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

void main() {
  const uint wid = et_group();
  if (wid >= p.B * p.H * p.nqb) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex, tx = tid % TX, ty = tid / TX;
  const uint bh = wid / p.nqb, qb = p.nqb - 1u - (wid - bh * p.nqb);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * AR, nq = min(AR, p.T - t0), off = p.S - p.T;
  const uint qstride = p.H * p.hd, kstride = p.KV * p.hd;
  const uint qbase = ((b * p.T + t0) * p.H + h) * p.hd, kbase = (b * p.S * p.KV + g) * p.hd;
  const float scale = scal[p.scale_idx];
  const uint hd4 = (p.hd + 3u) / 4u;

  ET_LOAD_TILE(Qs, 0u, AR, q, q4, qbase, qstride, nq, p.hd)

  float m[RI_MAX], l[RI_MAX];
  vec4 acc[RI_MAX * DQ_MAX];
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    m[i] = -ET_INF;
    l[i] = 0.0;
    [[unroll]] for (uint d = 0u; d < DQ; ++d) acc[i * DQ_MAX + d] = vec4(0.0);
  }
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
    barrier();  // the previous tile's readers of KVs and Ps are done
    ET_LOAD_TILE(KVs, 0u, BR, k, k4, kbase + c0 * kstride, kstride, nk, p.hd)
    barrier();
    float s[RI_MAX * KJ_MAX];
    [[unroll]] for (uint i = 0u; i < RI * KJ_MAX; ++i) s[i] = 0.0;
    ET_DOT_TILES(s, Qs, 0u, KVs, 0u)
    // Scale and mask (future keys and keys past S get -inf), and each row's max over this invocation's keys.
    float tmax[RI_MAX];
    [[unroll]] for (uint i = 0u; i < RI; ++i) {
      const uint t = t0 + ty + TY * i;
      tmax[i] = -ET_INF;
      [[unroll]] for (uint j = 0u; j < KJ; ++j) {
        const uint c = c0 + tx + TX * j;
        const bool seen = c < p.S && c <= t + off && (HAS_POS == 0u || c >= first[i]);
        const float x = seen ? scale * s[i * KJ_MAX + j] : -ET_INF;
        s[i * KJ_MAX + j] = x;
        tmax[i] = max(tmax[i], x);
      }
    }
    ET_ROW_SHARE(Ps, tmax)
    barrier();
    [[unroll]] for (uint i = 0u; i < RI; ++i) {
      // Tile 0 holds key 0, which every query sees: from then on m is finite. Under HAS_POS a row's first
      // tiles may hold none of its keys (mn = -inf): they add exp(-inf - 0) = 0.
      const float mn = max(m[i], ET_ROW_MAX(Ps, ty + TY * i));
      const float alpha = m[i] == mn ? 1.0 : exp(m[i] - mn);
      const float mz = HAS_POS == 1u && mn == -ET_INF ? 0.0 : mn;
      float sum = 0.0;
      [[unroll]] for (uint j = 0u; j < KJ; ++j) {
        const float e = exp(s[i * KJ_MAX + j] - mz);  // exp(-inf) = 0 for masked keys
        s[i * KJ_MAX + j] = e;
        sum += e;
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mn;
      [[unroll]] for (uint d = 0u; d < DQ; ++d) acc[i * DQ_MAX + d] *= alpha;
    }
    barrier();  // every invocation has read the row maxima before P overwrites them
    [[unroll]] for (uint i = 0u; i < RI; ++i)
      [[unroll]] for (uint j = 0u; j < KJ; ++j) Ps[p_at(ty + TY * i, (tx >> 2) + 4u * j)][tx & 3u] = s[i * KJ_MAX + j];
    ET_LOAD_TILE(KVs, 0u, BR, v, v4, kbase + c0 * kstride, kstride, nk, p.hd)
    barrier();
    ET_PV_TILES(acc, Ps, KVs, 0u)
  }
  barrier();
  ET_ROW_SHARE(Ps, l)
  barrier();
  [[unroll]] for (uint i = 0u; i < RI; ++i) {
    const uint r = ty + TY * i;
    if (r >= nq) continue;
    const float sum = ET_ROW_SUM(Ps, r), inv = 1.0 / sum;
    const uint orow = qbase + r * qstride;
    [[unroll]] for (uint d = 0u; d < DQ; ++d) {
      const uint slot = tx + TX * d;
      if (slot < hd4) { ET_STORE_SLOT(o, o4, orow + 4u * slot, slot, acc[i * DQ_MAX + d] * inv, p.hd) }
    }
    if (tx == 0u) lse[(b * p.H + h) * p.T + t0 + r] = m[i] + log(sum);
  }
}
