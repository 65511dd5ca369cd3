// A plain copy of n 32-bit words (dim_order_copy between equal dtypes, ops_copy.cpp). Memory-bound, so each
// thread moves four 16-byte vectors, all loads issued before the stores: a GPU needs many bytes in flight
// per thread to reach its bandwidth. Words past the last whole vector are copied one by one.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer X { uvec4 x4[]; };
layout(set = 0, binding = 0) readonly buffer Xw { uint xw[]; };
layout(set = 0, binding = 1) writeonly buffer O { uvec4 o4[]; };
layout(set = 0, binding = 1) writeonly buffer Ow { uint ow[]; };

layout(push_constant) uniform P {
  uint n;  // words
} p;

void main() {
  const uint base = et_group() * 1024 + gl_LocalInvocationID.x, n4 = p.n / 4;
  uvec4 v[4];
  [[unroll]] for (uint j = 0; j < 4; ++j)
    if (base + 256 * j < n4) v[j] = x4[base + 256 * j];
  [[unroll]] for (uint j = 0; j < 4; ++j)
    if (base + 256 * j < n4) o4[base + 256 * j] = v[j];
  if (et_group() == 0 && gl_LocalInvocationID.x < p.n % 4) {
    uint w = n4 * 4 + gl_LocalInvocationID.x;
    ow[w] = xw[w];
  }
}
