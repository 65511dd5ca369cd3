// fused_ce and fused_ce_part, loss pass: one workgroup sums the R per-row losses in a fixed order (strided
// lane sums, then a shared-memory tree), so the loss is deterministic run to run. Bindings as the op's
// per-row pass: fused_ce's loss 2 and row scratch 5; with PART, fused_ce_part's loss 3 and scratch 6 (its
// extra lse input shifts them). ACCUMULATE adds the loss's old value (the previous parts' sum).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // power of two
layout(constant_id = 1) const bool PART = false;
layout(constant_id = 2) const bool ACCUMULATE = false;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 2) buffer BufLoss { float Loss[]; };
layout(set = 0, binding = 5) readonly buffer BufRows { float RowLoss[]; };
layout(set = 0, binding = 3) buffer BufPartLoss { float PartLoss[]; };
layout(set = 0, binding = 6) readonly buffer BufPartRows { float PartRowLoss[]; };

layout(push_constant) uniform Push {
  uint R;
} pc;

shared float part[WG];

void main() {
  const uint lane = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint r = lane; r < pc.R; r += WG) s += PART ? PartRowLoss[r] : RowLoss[r];
  part[lane] = s;
  barrier();
  for (uint h = WG / 2; h > 0; h >>= 1) {
    if (lane < h) part[lane] += part[lane + h];
    barrier();
  }
  if (lane != 0) return;
  if (PART) PartLoss[0] = ACCUMULATE ? PartLoss[0] + part[0] : part[0];
  else Loss[0] = ACCUMULATE ? Loss[0] + part[0] : part[0];
}
