// softmax_backward along the last dim: dx = y * (dy - sum_j y_j dy_j), one workgroup per row (rows folded
// over the grid), the dot product summed in a fixed tree.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer Y { float y[]; };
layout(set = 0, binding = 1) readonly buffer DY { float dy[]; };
layout(set = 0, binding = 2) writeonly buffer DX { float dx[]; };

layout(push_constant) uniform P {
  uint n;
  uint rows;
} p;

void main() {
  uint row = et_group();
  if (row >= p.rows) return;
  uint lid = gl_LocalInvocationID.x, base = row * p.n;
  float d = 0.0;
  for (uint j = lid; j < p.n; j += WG) d += y[base + j] * dy[base + j];
  d = et_wg_sum(d);
  for (uint j = lid; j < p.n; j += WG) dx[base + j] = y[base + j] * (dy[base + j] - d);
}
