// q4gsw_ste_grad, in place: the clipped straight-through gradient. grad[n,k] = 0 unless
// -8.5*s <= latent[n,k] < 7.5*s with s = scales[k/gs, n] (see the reference in src/ref/train.cpp). The bounds
// are single products, correctly rounded (exact for fp16 scales), so the kept set equals the reference's.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufG { float G[]; };
layout(set = 0, binding = 1) readonly buffer BufL { float L[]; };
layout(set = 0, binding = 2) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 3) buffer BufGo { float Go[]; };  // the same buffer as binding 0

layout(push_constant) uniform Push {
  uint N, K, gs, numel;
} pc;

void main() {
  const uint i = linear_group_id() * 256 + gl_LocalInvocationID.x;
  if (i >= pc.numel) return;
  const uint n = i / pc.K, k = i % pc.K;
  precise const float s = S[(k / pc.gs) * pc.N + n], x = L[i];
  precise const float lo = -8.5 * s, hi = 7.5 * s;
  if (!(x >= lo && x < hi)) Go[i] = 0.0;
}
