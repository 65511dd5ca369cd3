// rms_norm: one workgroup per row (rows folded over the grid): rstd = 1/sqrt(mean(x^2) + eps) from a fixed
// tree sum, y = x * rstd * w; invocation 0 writes rstd[row]. eps comes from the scalar block.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer W { float w[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(set = 0, binding = 3) writeonly buffer R { float rstd[]; };
layout(set = 0, binding = 4) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint D;
  uint rows;
  uint eps_idx;
} p;

void main() {
  uint row = et_group();
  if (row >= p.rows) return;
  uint lid = gl_LocalInvocationID.x, base = row * p.D;
  float ss = 0.0;
  for (uint k = lid; k < p.D; k += WG) ss += x[base + k] * x[base + k];
  ss = et_wg_sum(ss);
  float r = 1.0 / sqrt(ss / float(p.D) + scal[p.eps_idx]);
  if (lid == 0u) rstd[row] = r;
  for (uint k = lid; k < p.D; k += WG) y[base + k] = x[base + k] * r * w[k];
}
