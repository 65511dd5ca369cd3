// silu_mul (SwiGLU): h = g * sigmoid(g) * u, one element per invocation.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer G { float g[]; };
layout(set = 0, binding = 1) readonly buffer U { float u[]; };
layout(set = 0, binding = 2) writeonly buffer H { float h[]; };

layout(push_constant) uniform P {
  uint n;
} p;

void main() {
  uint i = et_thread();
  if (i >= p.n) return;
  float gv = g[i];
  float s = 1.0 / (1.0 + exp(-gv));
  h[i] = gv * s * u[i];
}
