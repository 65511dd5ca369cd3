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

shared float sm[WG];
shared float sl[WG];

void main() {
  const uint r = linear_group_id();
  if (r >= pc.R) return;  // uniform across the workgroup
  const uint lane = gl_LocalInvocationID.x, base = r * pc.V;
  float m = -3.4028235e38, l = 0.0;
  for (uint j = lane; j < pc.V; j += WG) {
    float x = X[base + j];
    if (x > m) {
      l = l * exp(m - x) + 1.0;
      m = x;
    } else {
      l += exp(x - m);
    }
  }
  sm[lane] = m;
  sl[lane] = l;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lane < s) {
      float ma = sm[lane], mb = sm[lane + s], mm = max(ma, mb);
      sl[lane] = sl[lane] * exp(ma - mm) + sl[lane + s] * exp(mb - mm);
      sm[lane] = mm;
    }
    barrier();
  }
  if (lane != 0) return;
  const float mu = sm[0], z = sl[0];
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
