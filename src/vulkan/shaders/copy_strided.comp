// expand_copy and permute_copy: out[i] = x[dot(unravel(i, out dims), src strides)], rank <= 4, any dtype.
// 4-byte dtypes: one element per invocation; 1-byte dtypes: one output word (4 elements) per invocation,
// the tail word keeping bytes past the tensor.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint BYTES = 4;  // element size: 4 or 1

layout(set = 0, binding = 0) readonly buffer X { uint xw[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };

layout(push_constant) uniform P {
  uvec4 dims;     // out shape, leading 1s
  uvec4 strides;  // source element stride for each out dim (0 where broadcast)
  uint n;         // out elements
} p;

void main() {
  uint w = et_thread();
  if (BYTES == 4u) {
    if (w < p.n) ow[w] = xw[et_offset(w, p.dims, p.strides)];
    return;
  }
  uint first = 4u * w;
  if (first >= p.n) return;
  uint count = min(4u, p.n - first);
  uint word = 0u;
  for (uint k = 0u; k < count; ++k) {
    uint s = et_offset(first + k, p.dims, p.strides);
    word |= et_byte(xw[s >> 2], s & 3u) << (8u * k);
  }
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
