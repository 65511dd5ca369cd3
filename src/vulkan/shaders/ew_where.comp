// where: out = cond ? a : b with numpy broadcasting of all three (rank <= 4). cond is bool, one byte per
// element read out of 32-bit words; any nonzero byte is true.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer C { uint cw[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };
layout(set = 0, binding = 2) readonly buffer B { float b[]; };
layout(set = 0, binding = 3) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uvec4 dims;        // out shape, leading 1s
  uvec4 sc, sa, sb;  // strides of cond, a, b over out's dims (0 where broadcast)
  uint n;
} p;

void main() {
  uint t = et_thread();
  if (t >= p.n) return;
  uint ci = et_offset(t, p.dims, p.sc);
  bool c = et_byte(cw[ci >> 2], ci & 3u) != 0u;
  o[t] = c ? a[et_offset(t, p.dims, p.sa)] : b[et_offset(t, p.dims, p.sb)];
}
