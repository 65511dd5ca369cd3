// scale: out = s * x, four elements per invocation (vec4 views, scalar tail); s from the scalar block.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1) writeonly buffer O { float o[]; };
layout(set = 0, binding = 1) writeonly buffer O4 { vec4 o4[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint n;
  uint s_idx;
} p;

void main() {
  uint t = et_thread();
  float s = scal[p.s_idx];
  uint i = 4u * t;
  if (i + 3u < p.n) {
    o4[t] = s * x4[t];
  } else {
    for (; i < p.n; ++i) o[i] = s * x[i];
  }
}
