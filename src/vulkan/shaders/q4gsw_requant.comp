// q4gsw_requant: latent fp32 [N,K] -> W_4X8 codes, one thread per u32 word (4 k x 2 n). Each latent is first
// clamped in place into [-8.5s, 7.5s] (clamp_to_code_range, q4gsw_code.glsl) and written back only where
// that changed it. Codes by requant_code (q4gsw_code.glsl), bit-exact with the reference.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "q4gsw_code.glsl"

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer BufL { float L[]; };
layout(set = 0, binding = 1) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 2) writeonly buffer BufW { uint W[]; };
layout(set = 0, binding = 3) writeonly buffer BufLo { float Lo[]; };  // the same buffer as binding 0

layout(push_constant) uniform Push {
  uint N, K, N8, K4, G, gs, words;
} pc;

void main() {
  uint w = linear_group_id() * 64 + gl_LocalInvocationID.x;
  if (w >= pc.words) return;
  uint blk = w / 4, j = w % 4;
  uint k4 = blk / pc.N8, n8 = blk % pc.N8;
  uint word = 0u;
  for (uint p = 0; p < 2; ++p) {
    uint n = 8 * n8 + 2 * j + p;
    for (uint bk = 0; bk < 4; ++bk) {
      uint k = 4 * k4 + bk;
      uint c = 8u;
      if (n < pc.N && k < pc.K) {
        const uint i = n * pc.K + k;
        precise const float s = S[(k / pc.gs) * pc.N + n], x = L[i];
        const float xc = clamp_to_code_range(x, s);
        if (floatBitsToUint(xc) != floatBitsToUint(x)) Lo[i] = xc;
        c = requant_code(x, s);  // the same code as xc's: clamping stays within the code's rounding interval
      }
      word |= c << (8 * bk + 4 * p);
    }
  }
  W[w] = word;
}
