// sum / mean over adjacent dims: x viewed as [outer, red, inner], out [outer, inner]. PER_THREAD = 1:
// one invocation per output loops over red (short reductions; neighbours read neighbouring columns);
// otherwise one workgroup per output with a fixed tree. Either way deterministic.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint PER_THREAD = 0;
layout(constant_id = 2) const uint MEAN = 0;
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint outer, red, inner;
} p;

float finish(float s) {
  if (MEAN == 0u) return s;
  return p.red == 0u ? ET_NAN : s / float(p.red);
}

void main() {
  uint n_out = p.outer * p.inner;
  if (PER_THREAD == 1u) {
    uint i = et_thread();
    if (i >= n_out) return;
    uint a = i / p.inner, b = i % p.inner;
    uint base = a * p.red * p.inner + b;
    float s = 0.0;
    for (uint k = 0u; k < p.red; ++k) s += x[base + k * p.inner];
    o[i] = finish(s);
    return;
  }
  uint i = et_group();
  if (i >= n_out) return;  // uniform per workgroup
  uint a = i / p.inner, b = i % p.inner;
  uint base = a * p.red * p.inner + b;
  float s = 0.0;
  for (uint k = gl_LocalInvocationID.x; k < p.red; k += WG) s += x[base + k * p.inner];
  s = et_wg_sum(s);
  if (gl_LocalInvocationID.x == 0u) o[i] = finish(s);
}
