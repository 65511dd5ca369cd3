// The body of q4gsw_backward.comp / q4gsw_backward8.comp (ET_TILE outputs per thread per dimension), described below:
// linear_q4gsw_backward: dx[m,k] = sum_n dy[m,n] * W[n,k], W in W_4X8. A tiled GEMM contracting over n:
// (16*TM)x(16*TN) (m,k) output tile per 16x16 workgroup (64x64 or 128x128); per 16-deep n step the
// workgroup stages dy and the dequantized weight tile (16*TN k x 16 n, 2*BKO W_4X8 words) in shared memory.
#include "common.glsl"

const uint TM = ET_TILE;  // rows per thread (tile 16*TM)
const uint TN = ET_TILE;  // columns per thread (tile 16*TN)
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) readonly buffer BufDy { float Dy[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 3) writeonly buffer BufDx { float Dx[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs;
} pc;

const uint BM = 16 * TM, BKO = 16 * TN, BN = 16;
shared float Ds[BN][BM + 1];
shared float Ws[BN][BKO + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16 + tx;
  const uint row0 = gl_WorkGroupID.y * BM, k0 = gl_WorkGroupID.x * BKO;
  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint n0 = 0; n0 < pc.N; n0 += BN) {
    for (uint i = 0; i < TM; ++i) {
      uint e = tid + 256 * i;
      uint r = e / BN, nn = e % BN;
      uint gr = row0 + r, gn = n0 + nn;
      Ds[nn][r] = (gr < pc.M && gn < pc.N) ? Dy[gr * pc.N + gn] : 0.0;
    }
    for (uint wi = tid; wi < 2 * BKO; wi += 256) {  // BKO/4 k4 x 2 n8 blocks of 4 words
      uint blk = wi / 4, j = wi % 4;
      uint nn8 = blk % 2, kk4 = blk / 2;
      uint gk4 = k0 / 4 + kk4, gn8 = n0 / 8 + nn8;
      uint word = (gk4 < pc.K4 && gn8 < pc.N8) ? W[4 * (gk4 * pc.N8 + gn8) + j] : 0x88888888u;
      uint nl = nn8 * 8 + 2 * j, gn = n0 + nl;
      uint g = min(gk4 * 4 / pc.gs, pc.G - 1);
      float s0 = S[g * pc.N + min(gn, pc.N - 1)], s1 = S[g * pc.N + min(gn + 1, pc.N - 1)];
      for (uint bk = 0; bk < 4; ++bk) {
        uint kl = kk4 * 4 + bk;
        bool kin = k0 + kl < pc.K;
        Ws[nl][kl] = (kin && gn < pc.N) ? q4_value(q4_nibble(word, bk, 0)) * s0 : 0.0;
        Ws[nl + 1][kl] = (kin && gn + 1 < pc.N) ? q4_value(q4_nibble(word, bk, 1)) * s1 : 0.0;
      }
    }
    barrier();
    for (uint nn = 0; nn < BN; ++nn) {
      float a[TM], w[TN];
      for (uint i = 0; i < TM; ++i) a[i] = Ds[nn][ty + 16 * i];
      for (uint j = 0; j < TN; ++j) w[j] = Ws[nn][tx + 16 * j];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * w[j];
    }
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    uint r = row0 + ty + 16 * i;
    if (r >= pc.M) continue;
    for (uint j = 0; j < TN; ++j) {
      uint k = k0 + tx + 16 * j;
      if (k < pc.K) Dx[r * pc.K + k] = acc[i][j];
    }
  }
}
