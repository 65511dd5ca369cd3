// linear_q4gsw, GEMM path (M > 1): y[m,n] = sum_k x[m,k] * W[n,k] + bias[n] with W in W_4X8, included by
// linear_q4gsw.comp (64x64 tiles) and linear_q4gsw_big.comp (128x128) on the main loop of gemm_core.glsl.
// Stage B dequantizes the 16 x BN weight slice straight into shared memory, one W_4X8 word (4 k x 2 n)
// per thread.
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufX { float A[]; };   // x [M, K]
layout(set = 0, binding = 0) readonly buffer BufX4 { vec4 A4[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };     // scales [G, N]
layout(set = 0, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(set = 0, binding = 4) writeonly buffer BufY { float Y[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs, has_bias;
} pc;

#define ET_Q4_RED pc.K
#include "q4gsw_gemm.glsl"

// This thread's word of the slice (q4_slot), k4 block kk4, n8 block nn8: slice rows 4*kk4 .. (k), columns
// 8*nn8 + 2j and + 1 (n).
void stage_b(uint k0) {
  uint blk, j;
  if (!q4_slot(blk, j)) return;
  uint kk4 = blk / (BN / 8u), nn8 = blk % (BN / 8u), nl = nn8 * 8 + 2 * j;
  vec4 w0, w1;
  q4_word(k0 / 4 + kk4, col0 / 8 + nn8, j, w0, w1);
  [[unroll]] for (uint b = 0; b < 4; ++b) {
    Bs[kk4 * 4 + b][nl >> 2][nl & 3u] = w0[b];
    Bs[kk4 * 4 + b][nl >> 2][(nl & 3u) + 1] = w1[b];
  }
}

void store_c(uint r, uint c, vec4 v) {
  if (r >= pc.M) return;
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    uint cc = c + j;
    if (cc >= pc.N) continue;
    float x = v[j];
    if (pc.has_bias != 0u) x += Bias[cc];
    Y[r * pc.N + cc] = x;
  }
}
