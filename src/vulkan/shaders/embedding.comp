// embedding: out[i, d] = w[idx[i], d], one element per invocation; an index outside [0, V) gives NaN.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer W { float w[]; };
layout(set = 0, binding = 1) readonly buffer I { int idx[]; };
layout(set = 0, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint n;  // out elements
  uint V;
  uint D;
} p;

void main() {
  uint e = et_thread();
  if (e >= p.n) return;
  uint row = e / p.D, d = e % p.D;
  int v = idx[row];
  o[e] = (v >= 0 && uint(v) < p.V) ? w[uint(v) * p.D + d] : ET_NAN;
}
