// adamw_q4gsw_step: a 4-bit weight's update in one pass instead of adamw_step then q4gsw_requant — half the
// dispatches of a QAT update, and the latent is read once. One thread per W_4X8 word: rows 2r and 2r + 1 at
// k = 4k4 .. 4k4 + 3, threads running along k, so a subgroup reads consecutive latents of two rows, 16 bytes
// per row and thread (vec4 accesses where K % 4 == 0); the words themselves are written 4·N8 apart (1/64 of
// the bytes). Per element: adamw_update (adamw.glsl, as adamw_step.comp), then the new latent clamped into
// [-8.5s, 7.5s] and its code (clamp_to_code_range, requant_code: q4gsw_code.glsl); rows past N and k past
// K are padding code 8.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "adamw.glsl"
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
// The same latent, moments and gradient as vec4s, for K % 4 == 0 (VEC4): one 16-byte access per row.
layout(set = 0, binding = 0) readonly buffer BufL4 { vec4 L4[]; };
layout(set = 0, binding = 1) readonly buffer BufM4 { vec4 Mi4[]; };
layout(set = 0, binding = 2) readonly buffer BufV4 { vec4 Vi4[]; };
layout(set = 0, binding = 3) readonly buffer BufG4 { vec4 G4[]; };
layout(set = 0, binding = 6) writeonly buffer BufLo4 { vec4 Lo4[]; };
layout(set = 0, binding = 7) writeonly buffer BufMo4 { vec4 Mo4[]; };
layout(set = 0, binding = 8) writeonly buffer BufVo4 { vec4 Vo4[]; };
layout(set = 0, binding = 9) writeonly buffer BufGo4 { vec4 Go4[]; };

layout(constant_id = 0) const uint VEC4 = 0;  // 1: K % 4 == 0, every row starts on a vec4

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
  const uint valid = min(pc.K - 4 * k4, 4u);  // k past K: padding
  uint word = 0x88888888u;
  for (uint h = 0; h < 2; ++h) {
    const uint n = 2 * r + h;
    if (n >= pc.N) break;
    // group_size is a multiple of 4: the word's four k share one group.
    const float s = S[(4 * k4 / pc.gs) * pc.N + n];
    const uint i0 = n * pc.K + 4 * k4;
    precise vec4 g, p, m, v;
    if (VEC4 == 1u) {
      g = G4[i0 / 4];
      p = L4[i0 / 4];
      m = Mi4[i0 / 4];
      v = Vi4[i0 / 4];
    } else {
      for (uint b = 0; b < valid; ++b) {
        g[b] = G[i0 + b];
        p[b] = L[i0 + b];
        m[b] = Mi[i0 + b];
        v[b] = Vi[i0 + b];
      }
    }
    if (pc.scaled != 0u) g = g * GS[0];
    adamw_update(p, m, v, g, lr, b1, b2, eps, wd, bc1, bc2);
    vec4 clamped = p;
    for (uint b = 0; b < valid; ++b) {
      clamped[b] = clamp_to_code_range(p[b], s);
      const uint sh = 8 * b + 4 * h;
      word = (word & ~(0xfu << sh)) | (requant_code(p[b], s) << sh);  // the clamped value's code too
    }
    if (VEC4 == 1u) {
      Lo4[i0 / 4] = clamped;
      Mo4[i0 / 4] = m;
      Vo4[i0 / 4] = v;
      Go4[i0 / 4] = vec4(0.0);
    } else {
      for (uint b = 0; b < valid; ++b) {
        Lo[i0 + b] = clamped[b];
        Mo[i0 + b] = m[b];
        Vo[i0 + b] = v[b];
        Go[i0 + b] = 0.0;
      }
    }
  }
  W[4 * (k4 * pc.N8 + r / 4) + r % 4] = word;
}
