// gather: out[i] = x[i with coordinate DIM replaced by index[i]] (rank <= 4, leading dims padded with 1);
// an index outside [0, x.shape[dim]) gives NaN.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer I { int index[]; };
layout(set = 0, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uvec4 dims;     // index shape, leading 1s
  uvec4 strides;  // x strides (row-major over x's shape, leading 0s)
  uint n;         // out (= index) elements
  uint dim;       // in the padded rank-4 view
  uint size;      // x.shape[dim]
} p;

void main() {
  uint e = et_thread();
  if (e >= p.n) return;
  int v = index[e];
  if (v < 0 || uint(v) >= p.size) {
    o[e] = ET_NAN;
    return;
  }
  uint rest = e, off = 0u;
  for (int d = 3; d >= 0; --d) {
    uint c = rest % p.dims[d];
    rest /= p.dims[d];
    off += (uint(d) == p.dim ? uint(v) : c) * p.strides[d];
  }
  o[e] = x[off];
}
