// logsumexp_rows: one workgroup per row (rows folded over a 2-D grid). Lanes stream a strided slice once
// with an online softmax (running max, rescaled sum), merge (max, sum) pairs in a shared-memory tree, and
// lane 0 writes lse = max + log(sum), merged with the row's old lse when accumulating (one more term,
// exp(lse_old), scaled by the larger maximum): one call per vocabulary part gives the whole row's.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // power of two
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer BufX { float X[]; };
layout(set = 0, binding = 1) buffer BufLse { float Lse[]; };

layout(push_constant) uniform Push {
  uint R, V, accumulate;
} pc;

#include "online_softmax.glsl"

void main() {
  const uint r = linear_group_id();
  if (r >= pc.R) return;  // uniform across the workgroup
  const uint lane = gl_LocalInvocationID.x, base = r * pc.V;
  float m = -3.4028235e38, l = 0.0;
  for (uint j = lane; j < pc.V; j += WG) online_add(m, l, X[base + j]);
  const vec2 row = wg_online_merge(m, l, lane);
  if (lane != 0) return;
  const float mu = row.x, z = row.y;
  float v = mu + log(z);
  if (pc.accumulate != 0u) {
    const float old = Lse[r];
    if (isnan(old)) {
      v = old;
    } else if (!(isinf(old) && old < 0.0)) {
      const float mm = max(mu, old);
      v = mm + log(z * exp(mu - mm) + exp(old - mm));
    }
  }
  Lse[r] = v;
}
