// linear_q4gsw_backward: dx[m,k] = sum_n dy[m,n] * W[n,k] with W in W_4X8, a GEMM contracting over n,
// included by linear_q4gsw_backward.comp (64x64 tiles) and linear_q4gsw_backward_big.comp (128x128) on
// the main loop of gemm_core.glsl. Stage B dequantizes the 16 n x BN k weight slice straight into shared
// memory, one W_4X8 word (4 k x 2 n) per thread.
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufDy { float A[]; };  // dy [M, N]
layout(set = 0, binding = 0) readonly buffer BufDy4 { vec4 A4[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 3) writeonly buffer BufDx { float Dx[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs;
} pc;

#define ET_Q4_RED pc.N
#include "q4gsw_gemm.glsl"

// This thread's word of the slice (q4_slot), k4 block kk4, n8 block nn8: slice rows 8*nn8 + 2j and + 1
// (n), columns 4*kk4 .. (k, the output columns).
void stage_b(uint n0) {
  uint blk, j;
  if (!q4_slot(blk, j)) return;
  uint nn8 = blk & 1u, kk4 = blk >> 1, nl = nn8 * 8 + 2 * j;
  vec4 w0, w1;
  q4_word(col0 / 4 + kk4, n0 / 8 + nn8, j, w0, w1);
  Bs[nl][kk4] = w0;
  Bs[nl + 1][kk4] = w1;
}

void store_c(uint r, uint k, vec4 v) {
  if (r >= pc.M) return;
  [[unroll]] for (uint j = 0; j < 4; ++j)
    if (k + j < pc.K) Dx[r * pc.K + k + j] = v[j];
}
