// linear_q4gsw, GEMM path (M > 1): y[m,n] = sum_k x[m,k] * W[n,k] + bias[n] with W in W_4X8.
// 64x64 (m,n) tile per 16x16 workgroup, 4x4 outputs per thread; per 16-deep k step the workgroup stages
// x and the dequantized weight tile (one W_4X8 word = 4 k x 2 n per thread, 128 words) in shared memory.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) readonly buffer BufX { float X[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };     // scales [G, N]
layout(set = 0, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(set = 0, binding = 4) writeonly buffer BufY { float Y[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs, has_bias;
} pc;

const uint BM = 64, BN = 64, BK = 16;
shared float Xs[BK][BM + 1];
shared float Ws[BK][BN + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  float acc[4][4];
  for (uint i = 0; i < 4; ++i)
    for (uint j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    for (uint i = 0; i < 4; ++i) {
      uint e = tid + 256 * i;
      uint r = e / BK, kk = e % BK;
      uint gr = row0 + r, gk = k0 + kk;
      Xs[kk][r] = (gr < pc.M && gk < pc.K) ? X[gr * pc.K + gk] : 0.0;
    }
    if (tid < 128) {
      uint blk = tid / 4, j = tid % 4;
      uint kk4 = blk / 8, nn8 = blk % 8;
      uint gk4 = k0 / 4 + kk4, gn8 = col0 / 8 + nn8;
      uint word = (gk4 < pc.K4 && gn8 < pc.N8) ? W[4 * (gk4 * pc.N8 + gn8) + j] : 0x88888888u;
      uint nl = nn8 * 8 + 2 * j, gn = col0 + nl;
      uint g = min(gk4 * 4 / pc.gs, pc.G - 1);
      float s0 = S[g * pc.N + min(gn, pc.N - 1)], s1 = S[g * pc.N + min(gn + 1, pc.N - 1)];
      for (uint bk = 0; bk < 4; ++bk) {
        uint kl = kk4 * 4 + bk;
        bool kin = k0 + kl < pc.K;
        Ws[kl][nl] = (kin && gn < pc.N) ? q4_value(q4_nibble(word, bk, 0)) * s0 : 0.0;
        Ws[kl][nl + 1] = (kin && gn + 1 < pc.N) ? q4_value(q4_nibble(word, bk, 1)) * s1 : 0.0;
      }
    }
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float a[4], w[4];
      for (uint i = 0; i < 4; ++i) a[i] = Xs[kk][ty + 16 * i];
      for (uint j = 0; j < 4; ++j) w[j] = Ws[kk][tx + 16 * j];
      for (uint i = 0; i < 4; ++i)
        for (uint j = 0; j < 4; ++j) acc[i][j] += a[i] * w[j];
    }
    barrier();
  }

  for (uint i = 0; i < 4; ++i) {
    uint r = row0 + ty + 16 * i;
    if (r >= pc.M) continue;
    for (uint j = 0; j < 4; ++j) {
      uint c = col0 + tx + 16 * j;
      if (c >= pc.N) continue;
      float v = acc[i][j];
      if (pc.has_bias != 0u) v += Bias[c];
      Y[r * pc.N + c] = v;
    }
  }
}
