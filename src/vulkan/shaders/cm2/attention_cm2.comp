// Causal attention forward for the f16 flag through cooperative matrices 2 (VK_NV_cooperative_matrix2):
// workgroup-scope matrices that the driver lays out and feeds itself, tensor-addressed loads, row
// reductions. One workgroup of 128 invocations per (batch, query head, block of 64 queries), heavy (late)
// blocks first; per tile of 64 keys: S = scale * Q K^T (fp16 operands, fp32 products), masked, the row
// max and sum merged online, O = O * alpha + P V with P rounded to fp16. Same values as attention_coop.comp
// (fp16 q, k, v and probabilities; fp32 scores, softmax state and output) up to the order of the sums.
// q, k and v are read from fp16 copies that attention_cm2_copy16.comp made first (F16_COPIES), or, where the
// copies would pass a binding's limit, from their fp32 rows, rounded to fp16 as they are loaded (a decode
// function: a tensor load's elements are its buffer's type unless one converts them); the same values either
// way. Head dims that are multiples of 16. The copy kernel is compiled by glslc: copies written by kernels
// compiled here, by glslang 15, were read as zeros by these tensor loads (thirteenth and eighteenth sessions).
// H200 (docs/PERFORMANCE.md, twentieth session): B16 H12 T512 D64 0.163 -> 0.125 ms with the copies (their
// dispatch included), B4 H32 T1024 D64 0.343 -> 0.239.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference : require
#extension GL_GOOGLE_include_directive : require
#include "generic_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint HD = 64;       // head dim, a multiple of 16
layout(constant_id = 1) const uint HAS_POS = 0;   // 1: binding 3 holds pos [B, T]
layout(constant_id = 2) const uint F16_COPIES = 0;  // 1: q, k and v read from their fp16 copies (binding 7)
const uint BR = 64u, BC = 64u;                    // queries per workgroup, keys per tile

layout(set = 0, binding = 0) readonly buffer Qb { float q[]; };
layout(set = 0, binding = 1) readonly buffer Kb { float k[]; };
layout(set = 0, binding = 2) readonly buffer Vb { float v[]; };
layout(set = 0, binding = 3) readonly buffer Pb { int tok_pos[]; };  // a dummy unless HAS_POS
layout(set = 0, binding = 4) writeonly buffer Ob { float o[]; };
layout(set = 0, binding = 5) writeonly buffer Lb { float lse[]; };
layout(set = 0, binding = 6) readonly buffer Scalars { float scal[]; };
// The pooled scratch: the fp16 copies of q, k and v that attention_cm2_copy16.comp wrote (F16_COPIES).
layout(set = 0, binding = 7) readonly buffer H16 { float16_t h16[]; };

layout(push_constant) uniform P {
  uint B, T, S, H, KV, hd;
  uint nqb;        // query blocks per (batch, head)
  uint scale_idx;
  uint q16, k16, v16;  // F16_COPIES: uvec4 offsets of the copies in h16
} p;

#define ACC(C) coopmat<float, gl_ScopeWorkgroup, BR, C, gl_MatrixUseAccumulator>
#define NEG_INF uintBitsToFloat(0xff800000u)

#include "attention_cm2_layout.glsl"
#include "attention_pos.glsl"
uint first_key(uint b, uint t) { return t - uint(clamp(tok_pos[b * p.T + t], 0, int(t))); }

// One element of q, k or v, rounded to nearest even as the other kernels round their fp16 operands.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Element { float x; };
float16_t to_f16(const in F32Element e, const in uint block[2], const in uint in_block[2]) { return float16_t(e.x); }

float max_op(const in float a, const in float b) { return max(a, b); }
float sum_op(const in float a, const in float b) { return a + b; }
float first_op(const in float a, const in float b) { return a; }
// Keys a query does not see: past S, after the query (offset by S - T), before its sample (HAS_POS).
float mask_op(const in uint r, const in uint c, const in float e, const in uint b, const in uint t0, const in uint key0) {
  const uint t = t0 + r, key = key0 + c;
  bool seen = key < p.S && key <= t + (p.S - p.T);
  if (HAS_POS == 1u && t < p.T) seen = seen && key >= first_key(b, t);
  return seen ? e : NEG_INF;
}
float rescale_op(const in uint r, const in uint c, const in float m_old, const in float m_new) {
  return m_old == m_new ? 1.0 : exp(m_old - m_new);  // both -inf (no key seen yet): 1
}
// exp(s - m), with m = 0 where the row has seen no key yet (s is -inf there too)
float prob_op(const in uint r, const in uint c, const in float s, const in float m) {
  return exp(s - (m == NEG_INF ? 0.0 : m));
}
float store_out_op(const in uint r, const in uint c, const in float e, const in uint obase, const in uint nq) {
  if (r < nq && c < HD) o[obase + r * p.H * HD + c] = e;
  return e;
}
float store_lse_op(const in uint r, const in uint c, const in float e, const in uint lbase, const in uint nq) {
  if (c == 0u && r < nq) lse[lbase + r] = e;
  return e;
}

void main() {
  const uint wid = et_group();
  if (wid >= p.B * p.H * p.nqb) return;  // uniform per workgroup
  const uint bh = wid / p.nqb, qb = p.nqb - 1u - (wid - bh * p.nqb);
  const uint b = bh / p.H, h = bh - b * p.H, g = h / (p.H / p.KV);
  const uint t0 = qb * BR, nq = min(BR, p.T - t0), off = p.S - p.T;
  const float scale = scal[p.scale_idx];

  // Rows of q: (batch, token) pairs, columns: head * HD + d; likewise k and v with S and KV. Loads past the
  // last row read zeros; rows of the next sample that a block's padding rows or a tile's keys past S reach
  // are masked or never stored.
  const CLAMPED lq = rows_layout(p.B * p.T, p.H * HD), lk = rows_layout(p.B * p.S, p.KV * HD);
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA> mq;
  if (F16_COPIES == 1u) coopMatLoadTensorNV(mq, h16, p.q16 * 8u, sliceTensorLayoutNV(lq, b * p.T + t0, BR, h * HD, HD));
  else coopMatLoadTensorNV(mq, q, 0, sliceTensorLayoutNV(lq, b * p.T + t0, BR, h * HD, HD), to_f16);

  ACC(HD) acc = ACC(HD)(0.0);
  ACC(BC) l = ACC(BC)(0.0), m = ACC(BC)(NEG_INF);
  const uint kend = min(p.S, t0 + nq + off);  // keys [0, kend) are seen by some query of the block
  const uint cbeg = HAS_POS == 1u ? first_of_block(b, t0, nq) / BC * BC : 0u;
  [[dont_unroll]] for (uint key0 = cbeg; key0 < kend; key0 += BC) {
    coopmat<float16_t, gl_ScopeWorkgroup, HD, BC, gl_MatrixUseB> kt;
    if (F16_COPIES == 1u)
      coopMatLoadTensorNV(kt, h16, p.k16 * 8u, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD), transposed);
    else coopMatLoadTensorNV(kt, k, 0, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD), transposed, to_f16);
    ACC(BC) s = ACC(BC)(0.0);
    s = coopMatMulAdd(mq, kt, s);
    s = s * scale;
    if (HAS_POS == 1u || key0 + BC > t0 + off + 1u || key0 + BC > p.S) coopMatPerElementNV(s, s, mask_op, b, t0, key0);
    ACC(BC) rowmax, m_new, alpha, pr, rowsum;
    coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, max_op);
    [[unroll]] for (int i = 0; i < m_new.length(); ++i) m_new[i] = max(rowmax[i], m[i]);
    coopMatPerElementNV(alpha, m, rescale_op, m_new);
    coopMatPerElementNV(pr, s, prob_op, m_new);
    m = m_new;
    coopMatReduceNV(rowsum, pr, gl_CooperativeMatrixReduceRowNV, sum_op);
    l = alpha * l + rowsum;
    coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA> pa = coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>(pr);
    coopmat<float16_t, gl_ScopeWorkgroup, BC, HD, gl_MatrixUseB> mv;
    if (F16_COPIES == 1u) coopMatLoadTensorNV(mv, h16, p.v16 * 8u, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD));
    else coopMatLoadTensorNV(mv, v, 0, sliceTensorLayoutNV(lk, b * p.S + key0, BC, g * HD, HD), to_f16);
    ACC(HD) alpha_rows;
    coopMatReduceNV(alpha_rows, alpha, gl_CooperativeMatrixReduceRowNV, first_op);  // alpha, HD wide
    acc = acc * alpha_rows;
    acc = coopMatMulAdd(pa, mv, acc);
  }
  ACC(HD) inv;
  coopMatReduceNV(inv, l, gl_CooperativeMatrixReduceRowNV, first_op);
  [[unroll]] for (int i = 0; i < inv.length(); ++i) inv[i] = 1.0 / inv[i];
  acc = acc * inv;
  coopMatPerElementNV(acc, acc, store_out_op, ((b * p.T + t0) * p.H + h) * HD, nq);
  ACC(BC) lse_rows;
  [[unroll]] for (int i = 0; i < lse_rows.length(); ++i) lse_rows[i] = m[i] + log(l[i]);
  coopMatPerElementNV(lse_rows, lse_rows, store_lse_op, bh * p.T + t0, nq);
}
