// rms_norm_backward in three dispatches (MODE):
//   0: dx, one workgroup per row: dx = r * (dy*w - x*r * (1/D) sum_j dy_j w_j x_j r), tree-summed;
//   1: dw partials, one invocation per (chunk of CHUNK rows, column k) -> scratch[chunk * D + k];
//   2: dw, one invocation per column: the chunk partials in order, added to dw when accumulating.
// The column sums never depend on scheduling, so dw is deterministic without atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint MODE = 0;
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer DY { float dy[]; };
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) readonly buffer W { float w[]; };
layout(set = 0, binding = 3) readonly buffer R { float rstd[]; };
layout(set = 0, binding = 4) writeonly buffer DX { float dx[]; };
layout(set = 0, binding = 5) buffer DW { float dw[]; };
layout(set = 0, binding = 7) buffer Part { float part[]; };

layout(push_constant) uniform P {
  uint D;
  uint rows;
  uint chunk;     // rows per partial
  uint n_chunks;
  uint accumulate;
} p;

void main() {
  if (MODE == 0u) {
    uint row = et_group();
    if (row >= p.rows) return;
    uint lid = gl_LocalInvocationID.x, base = row * p.D;
    float r = rstd[row];
    float d = 0.0;
    for (uint k = lid; k < p.D; k += WG) d += dy[base + k] * w[k] * (x[base + k] * r);
    d = et_wg_sum(d) / float(p.D);
    for (uint k = lid; k < p.D; k += WG) dx[base + k] = r * (dy[base + k] * w[k] - x[base + k] * r * d);
    return;
  }
  uint t = et_thread();
  if (MODE == 1u) {
    if (t >= p.n_chunks * p.D) return;
    uint c = t / p.D, k = t % p.D;
    uint m0 = c * p.chunk, m1 = min(m0 + p.chunk, p.rows);
    float s = 0.0;
    for (uint m = m0; m < m1; ++m) s += dy[m * p.D + k] * x[m * p.D + k] * rstd[m];
    part[t] = s;
    return;
  }
  if (t >= p.D) return;
  float s = 0.0;
  for (uint c = 0u; c < p.n_chunks; ++c) s += part[c * p.D + t];
  dw[t] = p.accumulate != 0u ? dw[t] + s : s;
}
