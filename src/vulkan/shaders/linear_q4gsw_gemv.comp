// linear_q4gsw, decode path (one row of x per z): each workgroup owns COLS column blocks of 8 outputs;
// lanes split K in k4 steps (lanes of one step read COLS adjacent 16-byte W_4X8 blocks), keep 8 partial
// sums each, and a shared-memory pass sums the KSPLIT partials of every output in a fixed order.
// F16 (mixed precision: decoding and sampling at fp16): the operands are x and each weight (code - 8) * scale
// rounded to fp16, as every f16 kernel takes them, so the scale is applied per weight instead of per group sum.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint COLS = 4;     // 8-column blocks per workgroup
layout(constant_id = 1) const uint KSPLIT = 32;  // lanes along K; local size = COLS * KSPLIT
layout(local_size_x_id = 2) in;
layout(constant_id = 3) const uint F16 = 0;

layout(set = 0, binding = 0) readonly buffer BufX { float X[]; };
layout(set = 0, binding = 1) readonly buffer BufW { uvec4 W4[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(set = 0, binding = 4) writeonly buffer BufY { float Y[]; };

layout(push_constant) uniform Push {
  uint M, N, K, N8, K4, G, gs, has_bias;
} pc;

shared float partial[KSPLIT][COLS * 8];

void main() {
  const uint lane = gl_LocalInvocationID.x, c = lane % COLS, ks = lane / COLS;
  const uint n8_0 = linear_group_id() * COLS;
  if (n8_0 >= pc.N8) return;  // uniform across the workgroup
  const uint m = gl_WorkGroupID.z, n8 = n8_0 + c, xo = m * pc.K;
  float acc[8];
  for (uint i = 0; i < 8; ++i) acc[i] = 0.0;
  if (n8 < pc.N8) {
    for (uint k4 = ks; k4 < pc.K4; k4 += KSPLIT) {
      uvec4 blk = W4[k4 * pc.N8 + n8];
      uint k = 4 * k4;
      vec4 xv = vec4(X[xo + k], k + 1 < pc.K ? X[xo + k + 1] : 0.0, k + 2 < pc.K ? X[xo + k + 2] : 0.0,
                     k + 3 < pc.K ? X[xo + k + 3] : 0.0);
      uint g = min(k / pc.gs, pc.G - 1);
      if (F16 == 1u) xv = et_round_f16(xv);
      for (uint j = 0; j < 4; ++j) {
        uint word = blk[j], n = 8 * n8 + 2 * j;
        vec4 lo = vec4(q4_value(q4_nibble(word, 0, 0)), q4_value(q4_nibble(word, 1, 0)),
                       q4_value(q4_nibble(word, 2, 0)), q4_value(q4_nibble(word, 3, 0)));
        vec4 hi = vec4(q4_value(q4_nibble(word, 0, 1)), q4_value(q4_nibble(word, 1, 1)),
                       q4_value(q4_nibble(word, 2, 1)), q4_value(q4_nibble(word, 3, 1)));
        const float s_lo = S[g * pc.N + min(n, pc.N - 1)], s_hi = S[g * pc.N + min(n + 1, pc.N - 1)];
        if (F16 == 1u) {
          acc[2 * j] += dot(et_round_f16(lo * s_lo), xv);
          acc[2 * j + 1] += dot(et_round_f16(hi * s_hi), xv);
        } else {
          acc[2 * j] += dot(lo, xv) * s_lo;
          acc[2 * j + 1] += dot(hi, xv) * s_hi;
        }
      }
    }
  }
  for (uint i = 0; i < 8; ++i) partial[ks][c * 8 + i] = acc[i];
  barrier();
  if (lane < COLS * 8) {
    float s = 0.0;
    for (uint i = 0; i < KSPLIT; ++i) s += partial[i][lane];
    uint n = 8 * n8_0 + lane;
    if (n < pc.N) Y[m * pc.N + n] = pc.has_bias != 0u ? s + Bias[n] : s;
  }
}
