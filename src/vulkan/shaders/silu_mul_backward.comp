// silu_mul_backward: with s = sigmoid(g), dg = dh * u * s * (1 + g * (1 - s)), du = dh * g * s.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer DH { float dh[]; };
layout(set = 0, binding = 1) readonly buffer G { float g[]; };
layout(set = 0, binding = 2) readonly buffer U { float u[]; };
layout(set = 0, binding = 3) writeonly buffer DG { float dg[]; };
layout(set = 0, binding = 4) writeonly buffer DU { float du[]; };

layout(push_constant) uniform P {
  uint n;
} p;

void main() {
  uint i = et_thread();
  if (i >= p.n) return;
  float gv = g[i], d = dh[i];
  float s = 1.0 / (1.0 + exp(-gv));
  dg[i] = d * u[i] * s * (1.0 + gv * (1.0 - s));
  du[i] = d * gv * s;
}
