// embedding: out[i, d] = w[idx[i] - first, d], one element per invocation. w holds rows first .. first+V-1
// of a table of `total` rows: an index outside [0, total) gives NaN, one of another part is left unwritten.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer W { float w[]; };
layout(set = 0, binding = 1) readonly buffer I { int idx[]; };
layout(set = 0, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint n;  // out elements
  uint V;  // rows of this part
  uint D;
  uint first;
  uint total;
} p;

void main() {
  uint e = et_thread();
  if (e >= p.n) return;
  uint row = e / p.D, d = e % p.D;
  int v = idx[row];
  if (v < 0 || uint(v) >= p.total) o[e] = ET_NAN;
  else if (uint(v) >= p.first && uint(v) - p.first < p.V) o[e] = w[(uint(v) - p.first) * p.D + d];
}
