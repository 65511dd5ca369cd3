// fused_ce_part, per-row pass: one workgroup per row (rows folded over a 2-D grid) of one vocabulary part,
// columns first .. first+Vp-1, with the full row's lse given (logsumexp_rows). Lane 0 reads x[y - first]
// (when y is in this part) before the barrier, then each lane writes its strided slice of dlogits =
// (exp(x - lse) - onehot) / n_valid (dlogits may alias logits: each element is read and written by the same
// lane), and lane 0 the row's loss term into the per-row scratch; fused_ce_sum (PART) adds the rows up.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // power of two
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer BufL { float Lg[]; };  // no readonly: may alias dlogits
layout(set = 0, binding = 1) readonly buffer BufY { int Labels[]; };
layout(set = 0, binding = 2) readonly buffer BufLse { float Lse[]; };
layout(set = 0, binding = 4) buffer BufD { float D[]; };
layout(set = 0, binding = 5) readonly buffer BufScalars { float Sc[]; };
layout(set = 0, binding = 6) buffer BufRows { float RowLoss[]; };

layout(push_constant) uniform Push {
  uint R, Vp, n_valid_idx, first, total;
} pc;

shared float s_xy;

void main() {
  const uint r = linear_group_id();
  if (r >= pc.R) return;  // uniform across the workgroup
  const uint lane = gl_LocalInvocationID.x, base = r * pc.Vp;
  const int y = Labels[r];
  const bool valid = y >= 0 && uint(y) < pc.total;
  const bool here = valid && uint(y) >= pc.first && uint(y) - pc.first < pc.Vp;
  if (lane == 0) s_xy = here ? Lg[base + uint(y) - pc.first] : 0.0;  // before anyone writes dlogits
  barrier();
  const float nv = Sc[pc.n_valid_idx];
  if (y < 0) {
    for (uint j = lane; j < pc.Vp; j += WG) D[base + j] = 0.0;
    if (lane == 0) RowLoss[r] = 0.0;
  } else if (!valid) {
    for (uint j = lane; j < pc.Vp; j += WG) D[base + j] = nan_f32();
    if (lane == 0) RowLoss[r] = nan_f32();
  } else {
    const float lse = Lse[r];
    const uint yj = uint(y) - pc.first;  // wraps past Vp when y is in an earlier part: never matches j
    for (uint j = lane; j < pc.Vp; j += WG) {
      float p = exp(Lg[base + j] - lse);
      D[base + j] = (p - (here && j == yj ? 1.0 : 0.0)) / nv;
    }
    if (lane == 0) RowLoss[r] = ((pc.first == 0u ? lse : 0.0) - s_xy) / nv;
  }
}
