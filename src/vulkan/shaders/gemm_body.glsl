// The body of gemm.comp / gemm8.comp (ET_TILE outputs per thread per dimension), described below:
// Tiled fp32 GEMM for mm, bmm, linear and linear_dW: C[b] (+)= alpha * op(A[b]) @ op(B[b]) (+ bias).
// A (16*TM)x(16*TN) output tile per 16x16 workgroup (64x64 with 4x4 per thread, or 128x128 with 8x8 for
// big products), outputs strided by 16 so shared reads and global stores stay contiguous, and a 16-deep
// slice of A and B staged in shared memory per step. General
// row/contraction strides in push constants cover transposes; spec constants only pick coalesced load maps.
#include "common.glsl"

layout(constant_id = 0) const uint A_RED_CONTIG = 1;  // A's contraction index has stride 1
layout(constant_id = 1) const uint B_COL_CONTIG = 1;  // B's column index has stride 1
layout(constant_id = 2) const uint LAYOUT = 0;        // 0: a,b,out,scalars  1: x,w,bias,y,scalars
const uint TM = ET_TILE;  // rows per thread
const uint TN = ET_TILE;  // columns per thread

layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 2) buffer Buf2 { float P2[]; };  // out (LAYOUT 0) or bias (LAYOUT 1)
layout(set = 0, binding = 3) buffer Buf3 { float P3[]; };  // scalars (LAYOUT 0) or y (LAYOUT 1)
layout(set = 0, binding = 4) buffer Buf4 { float P4[]; };  // scalars (LAYOUT 1)

layout(push_constant) uniform Push {
  uint M, N, K;                  // C is [M, N], contraction K
  uint sa_row, sa_red;           // A(m, k) = A[a_batch*b + m*sa_row + k*sa_red]
  uint sb_red, sb_col;           // B(k, n) = B[b_batch*b + k*sb_red + n*sb_col]
  uint a_batch, b_batch, c_batch;
  uint alpha_idx;                // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;                    // bit 0: add bias[n]; bit 1: accumulate into C
} pc;

const uint BM = 16 * TM, BN = 16 * TN, BK = 16;
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

float scalar_at(uint i) { return LAYOUT == 0 ? P3[i] : P4[i]; }

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN, b = gl_WorkGroupID.z;
  const uint aoff = b * pc.a_batch, boff = b * pc.b_batch, coff = b * pc.c_batch;
  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    for (uint i = 0; i < TM; ++i) {
      uint e = tid + 256 * i;
      uint r = A_RED_CONTIG == 1 ? e / BK : e % BM;
      uint ka = A_RED_CONTIG == 1 ? e % BK : e / BM;
      uint gr = row0 + r, gk = k0 + ka;
      As[ka][r] = (gr < pc.M && gk < pc.K) ? A[aoff + gr * pc.sa_row + gk * pc.sa_red] : 0.0;
    }
    for (uint i = 0; i < TN; ++i) {
      uint e = tid + 256 * i;
      uint c = B_COL_CONTIG == 1 ? e % BN : e / BK;
      uint kb = B_COL_CONTIG == 1 ? e / BN : e % BK;
      uint gc = col0 + c, gkb = k0 + kb;
      Bs[kb][c] = (gc < pc.N && gkb < pc.K) ? B[boff + gkb * pc.sb_red + gc * pc.sb_col] : 0.0;
    }
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float a[TM], bv[TN];
      for (uint i = 0; i < TM; ++i) a[i] = As[kk][ty + 16 * i];
      for (uint j = 0; j < TN; ++j) bv[j] = Bs[kk][tx + 16 * j];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * bv[j];
    }
    barrier();
  }

  const float alpha = pc.alpha_idx == 0xffffffffu ? 1.0 : scalar_at(pc.alpha_idx);
  for (uint i = 0; i < TM; ++i) {
    uint r = row0 + ty + 16 * i;
    if (r >= pc.M) continue;
    for (uint j = 0; j < TN; ++j) {
      uint c = col0 + tx + 16 * j;
      if (c >= pc.N) continue;
      float v = alpha == 1.0 ? acc[i][j] : alpha * acc[i][j];
      uint idx = coff + r * pc.N + c;
      if (LAYOUT == 0) {
        if ((pc.flags & 2u) != 0u) v = P2[idx] + v;
        P2[idx] = v;
      } else {
        if ((pc.flags & 1u) != 0u) v += P2[c];
        if ((pc.flags & 2u) != 0u) v = P3[idx] + v;
        P3[idx] = v;
      }
    }
  }
}
