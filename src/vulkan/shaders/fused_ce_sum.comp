// fused_ce, loss pass: one workgroup sums the R per-row losses in a fixed order (strided lane sums, then a
// shared-memory tree), so the loss is deterministic run to run. Same bindings as fused_ce.comp.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // power of two
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 2) buffer BufLoss { float Loss[]; };
layout(set = 0, binding = 5) readonly buffer BufRows { float RowLoss[]; };

layout(push_constant) uniform Push {
  uint R, V, n_valid_idx;
} pc;

shared float part[WG];

void main() {
  const uint lane = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint r = lane; r < pc.R; r += WG) s += RowLoss[r];
  part[lane] = s;
  barrier();
  for (uint h = WG / 2; h > 0; h >>= 1) {
    if (lane < h) part[lane] += part[lane + h];
    barrier();
  }
  if (lane == 0) Loss[0] = part[0];
}
