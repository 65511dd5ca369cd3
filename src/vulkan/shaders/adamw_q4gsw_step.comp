// adamw_q4gsw_step: a 4-bit weight's update in one pass instead of adamw_step then q4gsw_requant — half the
// dispatches of a QAT update, and the latent is read once. One thread per W_4X8 word: rows 2r and 2r + 1 at
// k = 4k4 .. 4k4 + 3, threads running along k, so a subgroup reads consecutive latents of two rows (the
// words themselves are written 4·N8 apart; they are 1/64 of the bytes). Per element: adamw_step.comp's
// arithmetic in its order (precise, no contracted multiply-add), then q4gsw_requant.comp's clamp of the new
// latent into [-8.5s, 7.5s] and its code; rows past N and k past K are padding code 8.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "q4gsw_code.glsl"

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer BufL { float L[]; };
layout(set = 0, binding = 1) readonly buffer BufM { float Mi[]; };
layout(set = 0, binding = 2) readonly buffer BufV { float Vi[]; };
layout(set = 0, binding = 3) readonly buffer BufG { float G[]; };
layout(set = 0, binding = 4) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 5) readonly buffer BufGS { float GS[]; };  // grad_scale (a dummy when absent)
layout(set = 0, binding = 6) writeonly buffer BufLo { float Lo[]; };  // bindings 6..9: the buffers of 0..3
layout(set = 0, binding = 7) writeonly buffer BufMo { float Mo[]; };
layout(set = 0, binding = 8) writeonly buffer BufVo { float Vo[]; };
layout(set = 0, binding = 9) writeonly buffer BufGo { float Go[]; };
layout(set = 0, binding = 10) writeonly buffer BufW { uint W[]; };
layout(set = 0, binding = 11) readonly buffer BufScalars { float Sc[]; };

layout(push_constant) uniform Push {
  uint N, K, N8, K4, gs, threads;            // threads = 4·N8 row pairs (padding included) × K4
  uint lr, beta1, beta2, eps, wd, bc1, bc2;  // scalar-block indices
  uint scaled;                               // 1: grad_scale is bound
} pc;

void main() {
  const uint t = linear_group_id() * 64 + gl_LocalInvocationID.x;
  if (t >= pc.threads) return;
  const uint k4 = t % pc.K4, r = t / pc.K4;
  const float lr = Sc[pc.lr], b1 = Sc[pc.beta1], b2 = Sc[pc.beta2], eps = Sc[pc.eps], wd = Sc[pc.wd],
              bc1 = Sc[pc.bc1], bc2 = Sc[pc.bc2];
  uint word = 0u;
  for (uint h = 0; h < 2; ++h) {
    const uint n = 2 * r + h;
    // group_size is a multiple of 4: the word's four k share one group.
    const float s = n < pc.N ? S[(4 * k4 / pc.gs) * pc.N + n] : 0.0;
    for (uint b = 0; b < 4; ++b) {
      const uint k = 4 * k4 + b;
      uint c = 8u;
      if (n < pc.N && k < pc.K) {
        const uint i = n * pc.K + k;
        precise float g = G[i];
        if (pc.scaled != 0u) g = g * GS[0];
        precise float p = L[i];
        precise float m = Mi[i];
        precise float v = Vi[i];
        p = p - lr * wd * p;
        m = b1 * m + (1.0 - b1) * g;
        v = b2 * v + (1.0 - b2) * g * g;
        p = p - lr * (m / bc1) / (sqrt(v / bc2) + eps);
        precise const float lo = -8.5 * s, hi = 7.5 * s;
        // NaN is told by its bits: drivers may turn the selects below into min/max, which drop NaN.
        float pc_clamped = p;
        if ((floatBitsToUint(p) & 0x7fffffffu) <= 0x7f800000u) pc_clamped = p < lo ? lo : (p > hi ? hi : p);
        Lo[i] = pc_clamped;
        Mo[i] = m;
        Vo[i] = v;
        Go[i] = 0.0;
        c = requant_code(p, s);  // the same code as the clamped value's
      }
      word |= c << (8 * b + 4 * h);
    }
  }
  W[4 * (k4 * pc.N8 + r / 4) + r % 4] = word;
}
