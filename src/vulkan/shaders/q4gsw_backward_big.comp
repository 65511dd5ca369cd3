// linear_q4gsw_backward, large-shape path: dx[m,k] = sum_n dy[m,n] * W[n,k] with W in W_4X8, on the
// 128x128-tile main loop of linear_q4gsw_big_core.glsl (contracting over n); each thread dequantizes one
// W_4X8 word (4 k x 2 n) of the 16 n x 128 k weight slice per step.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufDy { float X[]; };
layout(set = 0, binding = 0) readonly buffer BufDy4 { vec4 X4[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uint W[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 3) writeonly buffer BufDx { float Dx[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs;
} pc;

#define ET_ROWS pc.M
#define ET_RED pc.N
#include "linear_q4gsw_big_core.glsl"

void stage_w(uint n0) {  // word (k4 block kk4, n8 block nn8, j) -> rows n0+8*nn8+2j, +1; columns 4*kk4..
  uint wi = gl_LocalInvocationID.x, blk = wi >> 2, j = wi & 3u;
  uint nn8 = blk & 1u, kk4 = blk >> 1;
  uint gk4 = col0 / 4 + kk4, gn8 = n0 / 8 + nn8;
  uint word = (gk4 < pc.K4 && gn8 < pc.N8) ? W[4 * (gk4 * pc.N8 + gn8) + j] : 0x88888888u;
  uint nl = nn8 * 8 + 2 * j, gn = n0 + nl;
  uint g = min(gk4 * 4 / pc.gs, pc.G - 1);
  float s0 = S[g * pc.N + min(gn, pc.N - 1)], s1 = S[g * pc.N + min(gn + 1, pc.N - 1)];
  vec4 w0 = vec4(0.0), w1 = vec4(0.0);
  [[unroll]] for (uint bk = 0; bk < 4; ++bk) {
    bool kin = col0 + kk4 * 4 + bk < pc.K;
    w0[bk] = (kin && gn < pc.N) ? q4_value(q4_nibble(word, bk, 0)) * s0 : 0.0;
    w1[bk] = (kin && gn + 1 < pc.N) ? q4_value(q4_nibble(word, bk, 1)) * s1 : 0.0;
  }
  Bs[nl][kk4] = w0;
  Bs[nl + 1][kk4] = w1;
}

void store_c(uint r, uint k, vec4 v) {
  if (r >= pc.M) return;
  [[unroll]] for (uint j = 0; j < 4; ++j)
    if (k + j < pc.K) Dx[r * pc.K + k + j] = v[j];
}
