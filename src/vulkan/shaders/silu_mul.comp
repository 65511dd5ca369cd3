// silu_mul (SwiGLU): h = g * sigmoid(g) * u. VEC = 1 (n a multiple of 4): four elements per invocation
// through vec4 loads, so a memory-bound GPU has four times the bytes in flight; else one element.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint VEC = 0;

layout(set = 0, binding = 0) readonly buffer G { float g[]; };
layout(set = 0, binding = 0) readonly buffer G4 { vec4 g4[]; };
layout(set = 0, binding = 1) readonly buffer U { float u[]; };
layout(set = 0, binding = 1) readonly buffer U4 { vec4 u4[]; };
layout(set = 0, binding = 2) writeonly buffer H { float h[]; };
layout(set = 0, binding = 2) writeonly buffer H4 { vec4 h4[]; };

layout(push_constant) uniform P {
  uint n;  // elements (VEC = 1: vec4s)
} p;

void main() {
  uint i = et_thread();
  if (i >= p.n) return;
  if (VEC == 1u) {
    vec4 gv = g4[i], uv = u4[i];
    vec4 s = 1.0 / (1.0 + exp(-gv));
    h4[i] = gv * s * uv;
    return;
  }
  float gv = g[i];
  float s = 1.0 / (1.0 + exp(-gv));
  h[i] = gv * s * u[i];
}
