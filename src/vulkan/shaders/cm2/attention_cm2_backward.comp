// Causal attention backward for the f16 flag through cooperative matrices 2 (VK_NV_cooperative_matrix2),
// the same arithmetic as attention_coop_backward.comp (fp16 q, k, v, dout, P and dS as the products'
// operands; fp32 scores, D, softmax and gradient sums; P recomputed from the forward's lse) on
// workgroup-scope matrices that the driver lays out and feeds itself. Two (GQA: three) dispatches after the fp16 copies
// of q, dout, k and v that attention_coop_copy16.comp (a glslc kernel, see attention_cm2.comp) writes into
// the pooled scratch after D:
//   MODE 0, dq: one workgroup of 128 invocations per (batch, query head, block of 64 queries), heavy (late)
//     blocks first. D = rowsum(dout * out) of its rows from the fp32 rows, into the scratch; per tile of
//     64 keys: S = Q K^T, dP = dout V^T, dS = P (dP - D) with P = exp(scale S - lse), dq += dS K;
//     dq *= scale.
//   MODE 1, dk/dv: one workgroup per (batch, query head, block of 64 keys), walking every tile of 64
//     queries that sees a key of the block, in the transposed orientation so that no matrix needs
//     transposing: S^T = K Q^T, P^T, dv += P^T dout; dP^T = V dout^T, dS^T = P^T (dP^T - D), dk += dS^T Q;
//     dk *= scale. Without GQA straight into dk and dv; with it, each head's share into the scratch, and
//   MODE 2 sums the group's shares in head order into dk and dv. (One workgroup walking the group's heads
//     left a quarter of the workgroups for Llama-3.2-1B's 32/8 heads: 0.73 ms for dk/dv of B4 T1024 on the
//     H200, against 0.23 ms for dq.)
// Masking (causal with an offset S - T, HAS_POS sample packing) as the other attention kernels. Loads past
// the last row read zeros (clamped layouts); rows of the next sample that padding rows reach are masked
// (their P and dS are 0) and never stored. Head dims that are multiples of 16 up to 128 (ops_llama.cpp).
// Tiles every query of which sees every key skip the mask (most tiles); MODE 1 keeps its query tile's lse
// and D in workgroup memory for the per-element ops (they were read from global memory per element).
// H200 (docs/PERFORMANCE.md, twenty-second and twenty-fifth sessions), copies included: B16 H12 T512 D64
// 0.452 ms (attention_coop_backward.comp) -> 0.405 -> 0.306 with those two, B4 H32 T1024 D64 0.876 -> 0.826
// -> 0.589; the 1B qlora fp16 step (GQA 32/8) 30,585 -> 31,466 tokens/s with them.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "generic_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint HD = 64;      // head dim, a multiple of 16
layout(constant_id = 1) const uint HAS_POS = 0;  // 1: binding 6 holds pos [B, T]
layout(constant_id = 2) const uint MODE = 0;     // 0 dq (and D), 1 dk/dv (or each head's share), 2 sum shares
const uint BR = 64u, BC = 64u;                   // queries, keys per block or tile

// The backward's bindings (attention_coop_backward.comp's): k and v (2, 3) only through their copies.
layout(set = 0, binding = 0) readonly buffer DOv { vec4 dout4[]; };
layout(set = 0, binding = 4) readonly buffer Ov { vec4 o4[]; };
layout(set = 0, binding = 5) readonly buffer Lb { float lse[]; };
layout(set = 0, binding = 6) readonly buffer Pb { int tok_pos[]; };  // a dummy unless HAS_POS
layout(set = 0, binding = 7) writeonly buffer DQb { float dq[]; };
layout(set = 0, binding = 8) writeonly buffer DKb { float dk[]; };
layout(set = 0, binding = 9) writeonly buffer DVb { float dv[]; };
layout(set = 0, binding = 10) readonly buffer Scalars { float scal[]; };
// The pooled scratch: D of every query row ([B][H][T], as lse), then the fp16 copies, then (GQA) each query
// head's shares of dk and dv ([B][S][H][hd] each, from float p.part).
layout(set = 0, binding = 11) buffer Db { float Dr[]; };
layout(set = 0, binding = 11) readonly buffer H16 { float16_t h16[]; };

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nblocks;  // MODE 0: query blocks per (batch, head); MODE 1: key blocks per (batch, kv head)
  uint scale_idx;
  uint q16, d16, k16, v16;  // uvec4 offsets of the copies in the scratch
  uint part;                // GQA: float offset of the dk shares in the scratch, the dv shares after them
} p;

shared float Dpart[128];      // MODE 0: half rows' dot products
shared float Ls[BR], Ds[BR];  // lse and D of the block's (MODE 0) or the tile's (MODE 1) query rows

#define ACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>
#define MATA(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseA>
#define MATB(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseB>
#include "attention_cm2_layout.glsl"
#include "attention_pos.glsl"
uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

// Whether query t of sample b sees key `key` (t < T, key < S).
bool sees(const in uint b, const in uint t, const in uint key) {
  bool seen = t < p.T && key < p.S && key <= t + (p.S - p.T);
  if (HAS_POS == 1u && seen) seen = key >= first_key(b, t);
  return seen;
}
// Whether every query of [t0, t0 + BR) sees every key of [c0, c0 + BC): no mask needed (most tiles).
bool whole_tile(const in uint t0, const in uint c0) {
  return HAS_POS == 0u && t0 + BR <= p.T && c0 + BC <= p.S && c0 + BC - 1u <= t0 + (p.S - p.T);
}
// MODE 0 on S (row: query t0 + r, column: key key0 + c): dS = P (dP - D), P = exp(scale S - lse); the
// masked form for tiles with keys some query does not see.
float ds_whole_op(const in uint r, const in uint c, const in float s, const in float dp, const in float scale) {
  return exp(scale * s - Ls[r]) * (dp - Ds[r]);
}
float ds_op(const in uint r, const in uint c, const in float s, const in float dp, const in uint b, const in uint t0,
            const in uint key0, const in float scale) {
  return sees(b, t0 + r, key0 + c) ? ds_whole_op(r, c, s, dp, scale) : 0.0;
}
// MODE 1 on S^T (row: key c0 + r, column: query t0 + c): P^T; likewise masked.
float pt_whole_op(const in uint r, const in uint c, const in float s, const in float scale) {
  return exp(scale * s - Ls[c]);
}
float pt_op(const in uint r, const in uint c, const in float s, const in uint b, const in uint t0, const in uint c0,
            const in float scale) {
  return sees(b, t0 + c, c0 + r) ? pt_whole_op(r, c, s, scale) : 0.0;
}
// MODE 1: dS^T = P^T (dP^T - D); 0 past T (whatever the next sample's rows hold).
float dst_op(const in uint r, const in uint c, const in float pt, const in float dpt, const in uint t0) {
  return t0 + c < p.T ? pt * (dpt - Ds[c]) : 0.0;
}
// Rows [0, n) of a block into an fp32 gradient whose row r starts at base + r * stride.
float store_rows_op(const in uint r, const in uint c, const in float e, const in uint which, const in uint base,
                    const in uint stride, const in uint n) {
  if (r < n && c < HD) {
    if (which == 0u) dq[base + r * stride + c] = e;
    else if (which == 1u) dk[base + r * stride + c] = e;
    else if (which == 2u) dv[base + r * stride + c] = e;
    else Dr[base + r * stride + c] = e;  // a head's share (3)
  }
  return e;
}

void dq_block(const in uint wid) {
  const uint bh = wid / p.nblocks, qb = p.nblocks - 1u - (wid - bh * p.nblocks);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * BR, nq = min(BR, p.T - t0), off = p.S - p.T, lb = bh * p.T + t0;
  const float scale = scal[p.scale_idx];
  // D from the unrounded fp32 rows, two invocations per row, into the scratch (MODE 1 reads it) and, with
  // the rows' lse, into workgroup memory for ds_op.
  {
    const uint r = gl_LocalInvocationIndex >> 1u, half_ = gl_LocalInvocationIndex & 1u;
    float d = 0.0;
    if (r < nq) {
      const uint base4 = (((b * p.T + t0 + r) * p.H + h) * HD + half_ * (HD / 2u)) / 4u;
      [[unroll]] for (uint i = 0u; i < HD / 8u; ++i) d += dot(dout4[base4 + i], o4[base4 + i]);
    }
    Dpart[gl_LocalInvocationIndex] = d;
    barrier();
    if (half_ == 0u) {
      const float dr = Dpart[2u * r] + Dpart[2u * r + 1u];
      Ds[r] = dr;
      Ls[r] = r < nq ? lse[lb + r] : 0.0;
      if (r < nq) Dr[lb + r] = dr;
    }
    barrier();
  }
  const CLAMPED lq = rows_layout(p.B * p.T, p.H * HD), lk = rows_layout(p.B * p.S, p.KV * HD);
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  MATA(BR, HD) mq, mdo;
  coopMatLoadTensorNV(mq, h16, p.q16 * 8u, sliceTensorLayoutNV(lq, b * p.T + t0, BR, h * HD, HD));
  coopMatLoadTensorNV(mdo, h16, p.d16 * 8u, sliceTensorLayoutNV(lq, b * p.T + t0, BR, h * HD, HD));
  ACC(BR, HD) dqa = ACC(BR, HD)(0.0);
  const uint kend = min(p.S, t0 + nq + off);
  const uint cbeg = HAS_POS == 1u ? first_of_block(b, t0, nq) / BC * BC : 0u;
  [[dont_unroll]] for (uint key0 = cbeg; key0 < kend; key0 += BC) {
    MATB(HD, BC) kt, vt;
    coopMatLoadTensorNV(kt, h16, p.k16 * 8u, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD), transposed);
    coopMatLoadTensorNV(vt, h16, p.v16 * 8u, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD), transposed);
    ACC(BR, BC) s = ACC(BR, BC)(0.0), dp = ACC(BR, BC)(0.0);
    s = coopMatMulAdd(mq, kt, s);
    dp = coopMatMulAdd(mdo, vt, dp);
    if (whole_tile(t0, key0)) coopMatPerElementNV(s, s, ds_whole_op, dp, scale);
    else coopMatPerElementNV(s, s, ds_op, dp, b, t0, key0, scale);
    MATA(BR, BC) dsa = MATA(BR, BC)(s);
    MATB(BC, HD) mk;
    coopMatLoadTensorNV(mk, h16, p.k16 * 8u, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD));
    dqa = coopMatMulAdd(dsa, mk, dqa);
  }
  dqa = dqa * scale;
  coopMatPerElementNV(dqa, dqa, store_rows_op, 0u, ((b * p.T + t0) * p.H + h) * HD, p.H * HD, nq);
}

// Whether a query of tile [t0, t0 + BR) sees a key of [c0, cend) (HAS_POS; without it every tile from the
// first does). Every invocation reads the same positions: uniform.
bool tile_sees(uint b, uint t0, uint c0, uint cend, uint off) {
  return HAS_POS == 0u || block_sees(b, t0, min(BR, p.T - t0), c0, cend, off);
}

void dkdv_block(const in uint wid) {
  const uint G = p.H / p.KV;
  const uint bh = wid / p.nblocks, kb = wid - bh * p.nblocks;  // early (heavy) key blocks first
  const uint b = bh / p.H, h = bh - b * p.H, g = h / G;
  const uint c0 = kb * BC, nk = min(BC, p.S - c0), off = p.S - p.T, lb = bh * p.T;
  const float scale = scal[p.scale_idx];
  const CLAMPED lq = rows_layout(p.B * p.T, p.H * HD), lk = rows_layout(p.B * p.S, p.KV * HD);
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  MATA(BC, HD) mk, mv;
  coopMatLoadTensorNV(mk, h16, p.k16 * 8u, sliceTensorLayoutNV(lk, b * p.S + c0, BC, g * HD, HD));
  coopMatLoadTensorNV(mv, h16, p.v16 * 8u, sliceTensorLayoutNV(lk, b * p.S + c0, BC, g * HD, HD));
  ACC(BC, HD) dka = ACC(BC, HD)(0.0), dva = ACC(BC, HD)(0.0);
  // Query t sees key c when c <= t + off: the first query tile that sees a key of the block.
  const uint tbeg = c0 > off ? (c0 - off) / BR * BR : 0u;
  [[dont_unroll]] for (uint t0 = tbeg; t0 < p.T; t0 += BR) {
    if (!tile_sees(b, t0, c0, c0 + nk, off)) continue;  // uniform
    // the tile's lse and D into workgroup memory for the per-element ops (0 past T)
    barrier();  // the previous tile's ops have read them
    {
      const uint i = gl_LocalInvocationIndex & (BR - 1u);
      const float x = t0 + i < p.T ? (gl_LocalInvocationIndex < BR ? lse[lb + t0 + i] : Dr[lb + t0 + i]) : 0.0;
      if (gl_LocalInvocationIndex < BR) Ls[i] = x;
      else Ds[i] = x;
    }
    barrier();
    const uint row = b * p.T + t0;
    MATB(HD, BR) qt, dot_;
    coopMatLoadTensorNV(qt, h16, p.q16 * 8u, sliceTensorLayoutNV(lq, row, BR, h * HD, HD), transposed);
    coopMatLoadTensorNV(dot_, h16, p.d16 * 8u, sliceTensorLayoutNV(lq, row, BR, h * HD, HD), transposed);
    ACC(BC, BR) st = ACC(BC, BR)(0.0), dpt = ACC(BC, BR)(0.0);
    st = coopMatMulAdd(mk, qt, st);
    dpt = coopMatMulAdd(mv, dot_, dpt);
    if (whole_tile(t0, c0)) coopMatPerElementNV(st, st, pt_whole_op, scale);
    else coopMatPerElementNV(st, st, pt_op, b, t0, c0, scale);
    MATB(BR, HD) mdo, mq;
    coopMatLoadTensorNV(mdo, h16, p.d16 * 8u, sliceTensorLayoutNV(lq, row, BR, h * HD, HD));
    coopMatLoadTensorNV(mq, h16, p.q16 * 8u, sliceTensorLayoutNV(lq, row, BR, h * HD, HD));
    MATA(BC, BR) pa = MATA(BC, BR)(st);
    dva = coopMatMulAdd(pa, mdo, dva);
    coopMatPerElementNV(st, st, dst_op, dpt, t0);
    pa = MATA(BC, BR)(st);
    dka = coopMatMulAdd(pa, mq, dka);
  }
  dka = dka * scale;
  if (G == 1u) {
    const uint base = ((b * p.S + c0) * p.KV + g) * HD;
    coopMatPerElementNV(dka, dka, store_rows_op, 1u, base, p.KV * HD, nk);
    coopMatPerElementNV(dva, dva, store_rows_op, 2u, base, p.KV * HD, nk);
  } else {
    const uint base = ((b * p.S + c0) * p.H + h) * HD;
    coopMatPerElementNV(dka, dka, store_rows_op, 3u, p.part + base, p.H * HD, nk);
    coopMatPerElementNV(dva, dva, store_rows_op, 3u, p.part + p.B * p.S * p.H * HD + base, p.H * HD, nk);
  }
}

// dk and dv as the sums of the group's shares, in head order: one invocation per element of each.
void sum_shares(const in uint i) {
  const uint G = p.H / p.KV, n = p.B * p.S * p.KV * HD;
  if (i >= 2u * n) return;
  const uint j = i < n ? i : i - n, row = j / HD, d = j - row * HD;  // row: (batch, key, kv head)
  const uint src = p.part + (i < n ? 0u : p.B * p.S * p.H * HD) + row * G * HD + d;
  float sum = 0.0;
  for (uint hh = 0u; hh < G; ++hh) sum += Dr[src + hh * HD];
  if (i < n) dk[j] = sum;
  else dv[j] = sum;
}

void main() {
  const uint wid = et_group();
  if (MODE == 2u) {
    sum_shares(wid * 128u + gl_LocalInvocationIndex);
    return;
  }
  if (wid >= p.B * p.H * p.nblocks) return;  // uniform per workgroup
  if (MODE == 0u) dq_block(wid);
  else dkdv_block(wid);
}
