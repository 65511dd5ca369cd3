// The body of linear_q4gsw.comp / linear_q4gsw8.comp (ET_TILE outputs per thread per dimension), described below:
// linear_q4gsw, GEMM path (M > 1): y[m,n] = sum_k x[m,k] * W[n,k] + bias[n] with W in W_4X8.
// (16*TM)x(16*TN) (m,n) tile per 16x16 workgroup (64x64 or 128x128); per 16-deep k step the workgroup
// stages x and the dequantized weight tile (W_4X8 words of 4 k x 2 n, 2*BN of them) in shared memory.
#include "common.glsl"

const uint TM = ET_TILE;  // rows per thread (tile 16*TM)
const uint TN = ET_TILE;  // columns per thread (tile 16*TN)
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) readonly buffer BufX { float X[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };     // scales [G, N]
layout(set = 0, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(set = 0, binding = 4) writeonly buffer BufY { float Y[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs, has_bias;
} pc;

const uint BM = 16 * TM, BN = 16 * TN, BK = 16;
shared float Xs[BK][BM + 1];
shared float Ws[BK][BN + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    for (uint i = 0; i < TM; ++i) {
      uint e = tid + 256 * i;
      uint r = e / BK, kk = e % BK;
      uint gr = row0 + r, gk = k0 + kk;
      Xs[kk][r] = (gr < pc.M && gk < pc.K) ? X[gr * pc.K + gk] : 0.0;
    }
    for (uint wi = tid; wi < 2 * BN; wi += 256) {  // 4 k4 x BN/8 n8 blocks of 4 words
      uint blk = wi / 4, j = wi % 4;
      uint kk4 = blk / (BN / 8), nn8 = blk % (BN / 8);
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
      float a[TM], w[TN];
      for (uint i = 0; i < TM; ++i) a[i] = Xs[kk][ty + 16 * i];
      for (uint j = 0; j < TN; ++j) w[j] = Ws[kk][tx + 16 * j];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * w[j];
    }
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    uint r = row0 + ty + 16 * i;
    if (r >= pc.M) continue;
    for (uint j = 0; j < TN; ++j) {
      uint c = col0 + tx + 16 * j;
      if (c >= pc.N) continue;
      float v = acc[i][j];
      if (pc.has_bias != 0u) v += Bias[c];
      Y[r * pc.N + c] = v;
    }
  }
}
