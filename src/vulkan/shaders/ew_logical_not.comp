// logical_not: bool -> bool, one 32-bit word (4 elements) per invocation; any nonzero byte is true.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer X { uint xw[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };

layout(push_constant) uniform P {
  uint n;
} p;

void main() {
  uint w = et_thread();
  uint first = 4u * w;
  if (first >= p.n) return;
  uint count = min(4u, p.n - first);
  uint x = xw[w], word = 0u;
  for (uint k = 0u; k < 4u; ++k) word |= (et_byte(x, k) == 0u ? 1u : 0u) << (8u * k);
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
