// Large-shape fp32 GEMM (mm, bmm, linear, linear_dW; chosen by ops_gemm.cpp for big products on GPUs):
// C[b] (+)= alpha * op(A[b]) @ op(B[b]) (+ bias) with a 128x128 tile per 256-thread workgroup, an 8x8
// register tile held in 16 named vec4 accumulators, 16-deep k slices staged in shared memory k-major
// (A transposed) so every thread reads both operands as vec4s, the next slice prefetched into registers
// during the FMAs, vec4 global loads where the spec constants say runs are 16-byte aligned, and an
// optional split-K mode that writes raw partial sums of K slice z to scratch (gemm_splitk_reduce.comp).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint A_RED_CONTIG = 1;  // A's contraction index has stride 1
layout(constant_id = 1) const uint B_COL_CONTIG = 1;  // B's column index has stride 1
layout(constant_id = 2) const uint LAYOUT = 0;        // 0: a,b,out,scalars(,scratch)  1: x,w,bias,y,scalars
layout(constant_id = 3) const uint VEC_A = 0;         // A's contiguous runs: aligned, whole vec4s in range
layout(constant_id = 4) const uint VEC_B = 0;         // same for B
layout(constant_id = 5) const uint SPLIT = 0;         // 1: z = K slice, raw partials to binding 4 (layout 0)

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { vec4 A4[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 B4[]; };
layout(set = 0, binding = 2) buffer Buf2 { float P2[]; };  // out (LAYOUT 0) or bias (LAYOUT 1)
layout(set = 0, binding = 3) buffer Buf3 { float P3[]; };  // scalars (LAYOUT 0) or y (LAYOUT 1)
layout(set = 0, binding = 4) buffer Buf4 { float P4[]; };  // scratch partials (LAYOUT 0) or scalars (1)

layout(push_constant) uniform Push {
  uint M, N, K;                  // C is [M, N], contraction K
  uint sa_row, sa_red;           // A(m, k) = A[a_batch*b + m*sa_row + k*sa_red]
  uint sb_red, sb_col;           // B(k, n) = B[b_batch*b + k*sb_red + n*sb_col]
  uint a_batch, b_batch, c_batch;
  uint alpha_idx;                // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;                    // bit 0: add bias[n]; bit 1: accumulate into C
  uint k_chunk;                  // SPLIT: contraction length per slice (multiple of 16)
} pc;

const uint BM = 128, BN = 128, BK = 16, PADV = 1;  // row pitch 33 vec4s against store conflicts
shared vec4 As[BK][BM / 4 + PADV];  // As[k][m/4][m%4] = A(row0 + m, k0 + k)
shared vec4 Bs[BK][BN / 4 + PADV];  // Bs[k][n/4][n%4] = B(k0 + k, col0 + n)

uint row0, col0, aoff, boff, kend;

// Four A values of load slot e (0..511) of the slice at k0, and where they go in As.
vec4 load_a(uint e, uint k0) {
  vec4 v = vec4(0.0);
  if (A_RED_CONTIG == 1) {  // 4 consecutive k of row r
    uint gr = row0 + (e >> 2), gk = k0 + (e & 3u) * 4;
    if (gr >= pc.M) return v;
    uint base = aoff + gr * pc.sa_row + gk;
    if (VEC_A == 1) {
      if (gk < kend) v = A4[base >> 2];
    } else {
      [[unroll]] for (uint j = 0; j < 4; ++j)
        if (gk + j < kend) v[j] = A[base + j * pc.sa_red];
    }
  } else {  // 4 consecutive rows at one k
    uint gr = row0 + (e & 31u) * 4, gk = k0 + (e >> 5);
    if (gk >= kend) return v;
    uint base = aoff + gr * pc.sa_row + gk * pc.sa_red;
    if (VEC_A == 1) {
      if (gr < pc.M) v = A4[base >> 2];
    } else {
      [[unroll]] for (uint j = 0; j < 4; ++j)
        if (gr + j < pc.M) v[j] = A[base + j * pc.sa_row];
    }
  }
  return v;
}
void store_a(uint e, vec4 v) {
  if (A_RED_CONTIG == 1) {
    uint r = e >> 2, kq = (e & 3u) * 4;
    [[unroll]] for (uint j = 0; j < 4; ++j) As[kq + j][r >> 2][r & 3u] = v[j];
  } else {
    As[e >> 5][e & 31u] = v;
  }
}

vec4 load_b(uint e, uint k0) {
  vec4 v = vec4(0.0);
  if (B_COL_CONTIG == 1) {  // 4 consecutive columns at one k
    uint gc = col0 + (e & 31u) * 4, gk = k0 + (e >> 5);
    if (gk >= kend) return v;
    uint base = boff + gk * pc.sb_red + gc;
    if (VEC_B == 1) {
      if (gc < pc.N) v = B4[base >> 2];
    } else {
      [[unroll]] for (uint j = 0; j < 4; ++j)
        if (gc + j < pc.N) v[j] = B[base + j * pc.sb_col];
    }
  } else {  // 4 consecutive k of column c
    uint gc = col0 + (e >> 2), gk = k0 + (e & 3u) * 4;
    if (gc >= pc.N) return v;
    uint base = boff + gc * pc.sb_col + gk * pc.sb_red;
    if (VEC_B == 1) {
      if (gk < kend) v = B4[base >> 2];
    } else {
      [[unroll]] for (uint j = 0; j < 4; ++j)
        if (gk + j < kend) v[j] = B[base + j * pc.sb_red];
    }
  }
  return v;
}
void store_b(uint e, vec4 v) {
  if (B_COL_CONTIG == 1) {
    Bs[e >> 5][e & 31u] = v;
  } else {
    uint c = e >> 2, kq = (e & 3u) * 4;
    [[unroll]] for (uint j = 0; j < 4; ++j) Bs[kq + j][c >> 2][c & 3u] = v[j];
  }
}

float scalar_at(uint i) { return LAYOUT == 0 ? P3[i] : P4[i]; }

// Writes outputs (r, c..c+3) of this workgroup's tile from v.
void store_c(uint r, uint c, vec4 v, float alpha, uint coff) {
  if (r >= pc.M) return;
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    uint cc = c + j;
    if (cc >= pc.N) continue;
    uint idx = r * pc.N + cc;
    if (SPLIT == 1) {
      P4[coff + idx] = v[j];
      continue;
    }
    float x = alpha == 1.0 ? v[j] : alpha * v[j];
    idx += coff;
    if (LAYOUT == 0) {
      if ((pc.flags & 2u) != 0u) x = P2[idx] + x;
      P2[idx] = x;
    } else {
      if ((pc.flags & 1u) != 0u) x += P2[cc];
      if ((pc.flags & 2u) != 0u) x = P3[idx] + x;
      P3[idx] = x;
    }
  }
}

#define FMA_ROW(i, a) c##i##0 += (a) * b0; c##i##1 += (a) * b1;
#define STORE_ROW(i, r) store_c(r, cbase, c##i##0, alpha, coff); store_c(r, cbase + 64, c##i##1, alpha, coff);

void main() {
  const uint tid = gl_LocalInvocationID.x, tx = tid & 15u, ty = tid >> 4;
  row0 = gl_WorkGroupID.y * BM;
  col0 = gl_WorkGroupID.x * BN;
  uint b = gl_WorkGroupID.z, kbeg = 0;
  kend = pc.K;
  uint coff = b * pc.c_batch;
  if (SPLIT == 1) {  // one batch; z picks the K slice and its partial-sum plane
    kbeg = b * pc.k_chunk;
    kend = min(pc.K, kbeg + pc.k_chunk);
    coff = b * pc.M * pc.N;
    b = 0;
  }
  aoff = b * pc.a_batch;
  boff = b * pc.b_batch;

  vec4 c00 = vec4(0), c01 = vec4(0), c10 = vec4(0), c11 = vec4(0), c20 = vec4(0), c21 = vec4(0);
  vec4 c30 = vec4(0), c31 = vec4(0), c40 = vec4(0), c41 = vec4(0), c50 = vec4(0), c51 = vec4(0);
  vec4 c60 = vec4(0), c61 = vec4(0), c70 = vec4(0), c71 = vec4(0);

  vec4 ra0 = load_a(tid, kbeg), ra1 = load_a(tid + 256, kbeg);
  vec4 rb0 = load_b(tid, kbeg), rb1 = load_b(tid + 256, kbeg);
  for (uint k0 = kbeg; k0 < kend; k0 += BK) {
    store_a(tid, ra0);
    store_a(tid + 256, ra1);
    store_b(tid, rb0);
    store_b(tid + 256, rb1);
    barrier();
    if (k0 + BK < kend) {  // next slice in flight while this one is multiplied
      ra0 = load_a(tid, k0 + BK);
      ra1 = load_a(tid + 256, k0 + BK);
      rb0 = load_b(tid, k0 + BK);
      rb1 = load_b(tid + 256, k0 + BK);
    }
    [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
      vec4 a0 = As[kk][ty], a1 = As[kk][ty + 16];
      vec4 b0 = Bs[kk][tx], b1 = Bs[kk][tx + 16];
      FMA_ROW(0, a0.x) FMA_ROW(1, a0.y) FMA_ROW(2, a0.z) FMA_ROW(3, a0.w)
      FMA_ROW(4, a1.x) FMA_ROW(5, a1.y) FMA_ROW(6, a1.z) FMA_ROW(7, a1.w)
    }
    barrier();
  }

  const float alpha = (SPLIT == 1 || pc.alpha_idx == 0xffffffffu) ? 1.0 : scalar_at(pc.alpha_idx);
  const uint rbase = row0 + ty * 4, cbase = col0 + tx * 4;
  STORE_ROW(0, rbase) STORE_ROW(1, rbase + 1) STORE_ROW(2, rbase + 2) STORE_ROW(3, rbase + 3)
  STORE_ROW(4, rbase + 64) STORE_ROW(5, rbase + 65) STORE_ROW(6, rbase + 66) STORE_ROW(7, rbase + 67)
}
