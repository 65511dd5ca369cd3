// The fp16 tensor-core GEMM through cooperative matrices 2 (VK_NV_cooperative_matrix2), chosen by
// ops_gemm_coop.cpp for the f16 flag where the device has them: C[b] (+)= alpha * A[b] @ B[b] (+ bias) from
// the fp16 operands gemm_split.comp staged in scratch, exactly what gemm_coop.comp F16 computes (fp16
// operands, fp32 accumulation; the order of the sums differs). One workgroup-scope BM x BN fp32 accumulator
// per workgroup (128x128 by 128 invocations; a narrow product's tile is as wide as it, Cm2Tile); the driver
// lays out and feeds the matrices itself through tensor-addressed loads of BK-deep slices. Padded operands
// (rows to a multiple of the tile, the contraction to a multiple of 64, zeros) mean no load leaves its
// operand. Whole tiles leave through tensor stores; partial tiles and bias through a per-element operation
// that tests m < M and n < N; either writes alpha * sum (+ bias) (+ C), or split-K's partial sum, as
// gemm_coop.comp does.
// H200 (docs/PERFORMANCE.md, seventeenth and eighteenth sessions): the 1B step's 4-bit products (staging
// included) 0.61-0.64 ms where gemm_coop.comp takes 0.73-0.78; the 1B qlora fp16 step 191 -> 172 ms (167 with
// the adapters' products on it and its split-K; 158 with their narrow tile).
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(constant_id = 0) const uint OUT_BIND = 2;     // binding of C
layout(constant_id = 1) const uint BIAS_BIND = 255;  // binding of bias[N], 255: none
layout(constant_id = 2) const uint SCALAR_BIND = 3;  // the scalar block (alpha)
layout(constant_id = 3) const uint SCR_BIND = 4;     // the scratch that gemm_split.comp filled (4, 5 or 6)
layout(constant_id = 4) const uint A_KMAJOR = 0;     // A's part is [batch][Kp][Mp] (else [batch][Mp][Kp])
layout(constant_id = 5) const uint B_KMAJOR = 0;     // B's part is [batch][Kp][Np] (else [batch][Np][Kp])

// The tile: BM x BN outputs per workgroup of WG invocations, BK-deep loads (ops_gemm_coop.cpp picks them).
layout(local_size_x_id = 6) in;
layout(constant_id = 7) const uint BM = 128;
layout(constant_id = 8) const uint BN = 128;
layout(constant_id = 9) const uint BK = 32;

#include "gemm_coop_io.glsl"
// The scratch bindings as the fp16 parts the tensor loads read.
layout(set = 0, binding = 4) readonly buffer H4 { float16_t h4[]; };
layout(set = 0, binding = 5) readonly buffer H5 { float16_t h5[]; };
layout(set = 0, binding = 6) readonly buffer H6 { float16_t h6[]; };

const uint UNROLL = 256u / BK;  // contraction steps per unrolled block
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// The epilogue of one element (row r, column c of the tile at m0, n0): split-K's partial sum, or
// alpha * sum (+ bias[n]) (+ C) into C.
float epilogue_op(const in uint r, const in uint c, const in float v, const in uint m0, const in uint n0,
                  const in uint bz, const in float alpha) {
  const uint m = m0 + r, n = n0 + c;
  if (m < pc.M && n < pc.N) {
    if (pc.part != 0xffffffffu) {
      st(SCR_BIND, pc.part + bz * pc.M * pc.N + m * pc.N + n, v);
    } else {
      float y = alpha == 1.0 ? v : v * alpha;
      if (BIAS_BIND != 255u && (pc.flags & 1u) != 0u) y += ld(BIAS_BIND, n);
      const uint o = bz * pc.c_batch + m * pc.N + n;
      if ((pc.flags & 2u) != 0u) y = ld(OUT_BIND, o) + y;
      st(OUT_BIND, o, y);
    }
  }
  return v;
}

void main() {
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  // Split-K (one batch): z picks a slice of the contraction; otherwise z is the batch.
  const bool split = pc.part != 0xffffffffu;
  const uint b = split ? 0u : gl_WorkGroupID.z;
  // Contraction steps of BK: slice z's first and one past its last (kslice and Kp are multiples of 64).
  const uint s_begin = split ? gl_WorkGroupID.z * (pc.kslice / BK) : 0u;
  const uint s_end = min(pc.Kp / BK, s_begin + pc.kslice / BK);
  // Every offset, stride and slice start is written so that the compiler sees it is a multiple of 8 halves
  // (16 bytes): a probe on an H200 with the strides given as plain values ran 6x slower (docs/PERFORMANCE.md).
  const uint a_base = (pc.a_hi + b * (pc.Mp / 8u) * pc.Kp) * 8u, b_base = (pc.b_hi + b * (pc.Np / 8u) * pc.Kp) * 8u;
  tensorLayoutNV<2> tA = createTensorLayoutNV(2), tB = createTensorLayoutNV(2);
  if (A_KMAJOR == 1u) {
    tA = setTensorLayoutDimensionNV(tA, pc.Kp, pc.Mp);
    tA = setTensorLayoutStrideNV(tA, pc.Mp & ~7u, 1);
  } else {
    tA = setTensorLayoutDimensionNV(tA, pc.Mp, pc.Kp);
    tA = setTensorLayoutStrideNV(tA, pc.Kp & ~7u, 1);
  }
  if (B_KMAJOR == 1u) {
    tB = setTensorLayoutDimensionNV(tB, pc.Kp, pc.Np);
    tB = setTensorLayoutStrideNV(tB, pc.Np & ~7u, 1);
  } else {
    tB = setTensorLayoutDimensionNV(tB, pc.Np, pc.Kp);
    tB = setTensorLayoutStrideNV(tB, pc.Kp & ~7u, 1);
  }
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  MAT_C acc = MAT_C(0.0);
#define LOAD_FROM(ma, mb, h, k)                                                                        \
  if (A_KMAJOR == 1u) coopMatLoadTensorNV(ma, h, a_base, sliceTensorLayoutNV(tA, k, BK, m0, BM), transposed); \
  else coopMatLoadTensorNV(ma, h, a_base, sliceTensorLayoutNV(tA, m0, BM, k, BK));                     \
  if (B_KMAJOR == 1u) coopMatLoadTensorNV(mb, h, b_base, sliceTensorLayoutNV(tB, k, BK, n0, BN));      \
  else coopMatLoadTensorNV(mb, h, b_base, sliceTensorLayoutNV(tB, n0, BN, k, BK), transposed);
#define STEP(k)                                                \
  {                                                            \
    MAT_A ma;                                                  \
    MAT_B mb;                                                  \
    if (SCR_BIND == 4u) { LOAD_FROM(ma, mb, h4, k) }           \
    else if (SCR_BIND == 5u) { LOAD_FROM(ma, mb, h5, k) }      \
    else { LOAD_FROM(ma, mb, h6, k) }                          \
    acc = coopMatMulAdd(ma, mb, acc);                          \
  }
  uint s = s_begin;
  for (; s + UNROLL <= s_end; s += UNROLL) {
    [[unroll]] for (uint u = 0; u < UNROLL; ++u) STEP((s + u) * BK)
  }
  for (; s < s_end; ++s) STEP(s * BK)
  // A low-rank update folded in (ops_gemm.h, fuse_low_rank_update): A2 [Mp][kp2] times B2 [kp2][Np], kp2 a
  // multiple of BK; added once, to slice 0 when the contraction is split.
  if (pc.kp2 != 0u && (!split || gl_WorkGroupID.z == 0u)) {
    tensorLayoutNV<2> tA2 = createTensorLayoutNV(2), tB2 = createTensorLayoutNV(2);
    tA2 = setTensorLayoutDimensionNV(tA2, pc.Mp, pc.kp2);
    tA2 = setTensorLayoutStrideNV(tA2, pc.kp2 & ~7u, 1);
    tB2 = setTensorLayoutDimensionNV(tB2, pc.kp2, pc.Np);
    tB2 = setTensorLayoutStrideNV(tB2, pc.Np & ~7u, 1);
    const uint a2 = pc.a2_hi * 8u, b2 = pc.b2_hi * 8u;
    for (uint k = 0; k < pc.kp2; k += BK) {
      MAT_A ma;
      MAT_B mb;
      if (SCR_BIND == 4u) {
        coopMatLoadTensorNV(ma, h4, a2, sliceTensorLayoutNV(tA2, m0, BM, k, BK));
        coopMatLoadTensorNV(mb, h4, b2, sliceTensorLayoutNV(tB2, k, BK, n0, BN));
      } else if (SCR_BIND == 5u) {
        coopMatLoadTensorNV(ma, h5, a2, sliceTensorLayoutNV(tA2, m0, BM, k, BK));
        coopMatLoadTensorNV(mb, h5, b2, sliceTensorLayoutNV(tB2, k, BK, n0, BN));
      } else {
        coopMatLoadTensorNV(ma, h6, a2, sliceTensorLayoutNV(tA2, m0, BM, k, BK));
        coopMatLoadTensorNV(mb, h6, b2, sliceTensorLayoutNV(tB2, k, BK, n0, BN));
      }
      acc = coopMatMulAdd(ma, mb, acc);
    }
  }

  const float alpha = pc.alpha_idx == 0xffffffffu ? 1.0 : ld(SCALAR_BIND, pc.alpha_idx);
  // A whole tile without bias whose rows start on 16-byte boundaries goes out through tensor stores (and
  // accumulates through a tensor load): a 4096x8192x2048 product took 0.835 ms with the per-element
  // epilogue below for every tile, 0.633 with this (H200). Partial tiles and bias take that epilogue.
  const bool bias = BIAS_BIND != 255u && (pc.flags & 1u) != 0u;
  const uint c_base = split ? pc.part + gl_WorkGroupID.z * pc.M * pc.N : b * pc.c_batch;
  if (m0 + BM <= pc.M && n0 + BN <= pc.N && !bias && pc.N % 8u == 0u && c_base % 8u == 0u) {
    tensorLayoutNV<2> tC = createTensorLayoutNV(2);
    tC = setTensorLayoutDimensionNV(tC, pc.M, pc.N);
    tC = setTensorLayoutStrideNV(tC, pc.N & ~7u, 1);
    const uint at = c_base & ~7u;
    if (split) {
      if (SCR_BIND == 4u) coopMatStoreTensorNV(acc, f4, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      else if (SCR_BIND == 5u) coopMatStoreTensorNV(acc, f5, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      else coopMatStoreTensorNV(acc, f6, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      return;
    }
    if (alpha != 1.0) acc = acc * alpha;
    if ((pc.flags & 2u) != 0u) {
      MAT_C c;
      if (OUT_BIND == 2u) coopMatLoadTensorNV(c, f2, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      else if (OUT_BIND == 3u) coopMatLoadTensorNV(c, f3, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      else coopMatLoadTensorNV(c, f4, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
      acc = acc + c;
    }
    if (OUT_BIND == 2u) coopMatStoreTensorNV(acc, f2, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
    else if (OUT_BIND == 3u) coopMatStoreTensorNV(acc, f3, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
    else coopMatStoreTensorNV(acc, f4, at, sliceTensorLayoutNV(tC, m0, BM, n0, BN));
    return;
  }
  coopMatPerElementNV(acc, acc, epilogue_op, m0, n0, gl_WorkGroupID.z, alpha);
}
