// Split-K epilogue of gemm_big.comp and gemm_coop.comp: C[i] (+)= alpha * sum_s partial[s][i], slices
// added in a fixed order (s = 0, 1, ...) so results are deterministic. Bindings follow gemm layout 0: a, b,
// out, scalars, scratch (gemm_big's own partials buffer, or the pooled scratch of gemm_coop at `base`).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(set = 0, binding = 2) buffer BufOut { float C[]; };
layout(set = 0, binding = 3) readonly buffer BufScalars { float Scal[]; };
layout(set = 0, binding = 4) readonly buffer BufPart { float Part[]; };

layout(push_constant) uniform Push {
  uint count;      // M * N
  uint splits;     // partial-sum planes
  uint alpha_idx;  // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;      // bit 1: accumulate into C
  uint base;       // float offset of partial[0][0] in the scratch
} pc;

void main() {
  uint i = linear_group_id() * 256 + gl_LocalInvocationID.x;
  if (i >= pc.count) return;
  float v = Part[pc.base + i];
  for (uint s = 1; s < pc.splits; ++s) v += Part[pc.base + s * pc.count + i];
  if (pc.alpha_idx != 0xffffffffu) {
    float alpha = Scal[pc.alpha_idx];
    if (alpha != 1.0) v = alpha * v;
  }
  if ((pc.flags & 2u) != 0u) v = C[i] + v;
  C[i] = v;
}
