// add / sub / mul / div of two f32 tensors with numpy broadcasting (rank <= 4). FAST = 1 when a, b and
// out have one shape: four elements per invocation through vec4 views, scalar tail.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint OP = 0;    // 0 add, 1 sub, 2 mul, 3 div
layout(constant_id = 1) const uint FAST = 0;  // 1: equal shapes

layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 2) writeonly buffer O { float o[]; };
layout(set = 0, binding = 2) writeonly buffer O4 { vec4 o4[]; };
layout(set = 0, binding = 3) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uvec4 dims;      // out shape, leading 1s
  uvec4 sa, sb;    // element strides of a and b over out's dims, 0 where broadcast
  uint n;          // out numel
  uint alpha_idx;  // scalar-block index of alpha (add/sub)
} p;

float apply(float x, float y, float alpha) {
  precise float r;
  if (OP == 0u) r = x + alpha * y;
  else if (OP == 1u) r = x - alpha * y;
  else if (OP == 2u) r = x * y;
  else r = x / y;
  return r;
}

vec4 apply4(vec4 x, vec4 y, float alpha) {
  precise vec4 r;
  if (OP == 0u) r = x + alpha * y;
  else if (OP == 1u) r = x - alpha * y;
  else if (OP == 2u) r = x * y;
  else r = x / y;
  return r;
}

void main() {
  uint t = et_thread();
  float alpha = (OP <= 1u) ? scal[p.alpha_idx] : 1.0;
  if (FAST == 1u) {
    uint i = 4u * t;
    if (i + 3u < p.n) {
      o4[t] = apply4(a4[t], b4[t], alpha);
    } else {
      for (; i < p.n; ++i) o[i] = apply(a[i], b[i], alpha);
    }
    return;
  }
  if (t >= p.n) return;
  o[t] = apply(a[et_offset(t, p.dims, p.sa)], b[et_offset(t, p.dims, p.sb)], alpha);
}
