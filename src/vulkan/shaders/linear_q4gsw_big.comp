// linear_q4gsw, large-shape GEMM path: y[m,n] = sum_k x[m,k] * W[n,k] + bias[n] with W in W_4X8, on the
// 128x128-tile main loop of linear_q4gsw_big_core.glsl; each thread dequantizes one W_4X8 word (4 k x 2 n)
// of the 16 x 128 weight slice per step.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufX { float X[]; };
layout(set = 0, binding = 0) readonly buffer BufX4 { vec4 X4[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };     // scales [G, N]
layout(set = 0, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(set = 0, binding = 4) writeonly buffer BufY { float Y[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs, has_bias;
} pc;

#define ET_ROWS pc.M
#define ET_RED pc.K
#include "linear_q4gsw_big_core.glsl"

void stage_w(uint k0) {  // word (k4 block kk4, n8 block nn8, j) -> rows k0+4*kk4.., columns 2j, 2j+1
  uint wi = gl_LocalInvocationID.x, blk = wi >> 2, j = wi & 3u;
  uint kk4 = blk >> 4, nn8 = blk & 15u;
  uint gk4 = k0 / 4 + kk4, gn8 = col0 / 8 + nn8;
  uint word = (gk4 < pc.K4 && gn8 < pc.N8) ? W[4 * (gk4 * pc.N8 + gn8) + j] : 0x88888888u;
  uint nl = nn8 * 8 + 2 * j, gn = col0 + nl;
  uint g = min(gk4 * 4 / pc.gs, pc.G - 1);
  float s0 = S[g * pc.N + min(gn, pc.N - 1)], s1 = S[g * pc.N + min(gn + 1, pc.N - 1)];
  [[unroll]] for (uint bk = 0; bk < 4; ++bk) {
    uint kl = kk4 * 4 + bk;
    bool kin = k0 + kl < pc.K;
    Bs[kl][nl >> 2][nl & 3u] = (kin && gn < pc.N) ? q4_value(q4_nibble(word, bk, 0)) * s0 : 0.0;
    Bs[kl][nl >> 2][(nl & 3u) + 1] = (kin && gn + 1 < pc.N) ? q4_value(q4_nibble(word, bk, 1)) * s1 : 0.0;
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
