// fused_ce, per-row pass: one workgroup per row (rows folded over a 2-D grid). Lanes stream a strided slice
// once with an online softmax (running max, rescaled sum), merge (max, sum) pairs in a shared-memory tree,
// then write dlogits (which may alias logits: each element is read and written by the same lane) and the
// row's loss into the per-row scratch; fused_ce_sum adds the rows up.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // power of two
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer BufL { float Lg[]; };  // no readonly: may alias dlogits
layout(set = 0, binding = 1) readonly buffer BufY { int Labels[]; };
layout(set = 0, binding = 2) buffer BufLoss { float Loss[]; };
layout(set = 0, binding = 3) buffer BufD { float D[]; };
layout(set = 0, binding = 4) readonly buffer BufScalars { float Sc[]; };
layout(set = 0, binding = 5) buffer BufRows { float RowLoss[]; };

layout(push_constant) uniform Push {
  uint R, V, n_valid_idx;
} pc;

#include "online_softmax.glsl"
shared float s_xy;

void main() {
  const uint r = linear_group_id();
  if (r >= pc.R) return;  // uniform across the workgroup
  const uint lane = gl_LocalInvocationID.x, base = r * pc.V;
  const int y = Labels[r];
  float m = -3.4028235e38, l = 0.0;
  if (y >= 0 && uint(y) < pc.V)
    for (uint j = lane; j < pc.V; j += WG) online_add(m, l, Lg[base + j]);
  const vec2 row = wg_online_merge(m, l, lane);
  if (lane == 0 && y >= 0 && uint(y) < pc.V) s_xy = Lg[base + uint(y)];  // before anyone writes dlogits
  barrier();
  const float mu = row.x, z = row.y, nv = Sc[pc.n_valid_idx];
  if (y < 0) {
    for (uint j = lane; j < pc.V; j += WG) D[base + j] = 0.0;
    if (lane == 0) RowLoss[r] = 0.0;
  } else if (uint(y) >= pc.V) {
    for (uint j = lane; j < pc.V; j += WG) D[base + j] = nan_f32();
    if (lane == 0) RowLoss[r] = nan_f32();
  } else {
    for (uint j = lane; j < pc.V; j += WG) {
      float p = exp(Lg[base + j] - mu) / z;
      D[base + j] = (p - (j == uint(y) ? 1.0 : 0.0)) / nv;
    }
    if (lane == 0) RowLoss[r] = (mu + log(z) - s_xy) / nv;
  }
}
