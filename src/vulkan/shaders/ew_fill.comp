// fill: out[...] = value converted to out's dtype, one 32-bit word per invocation. The value is read
// from the scalar block (it may change per replay), so the conversion happens here, as in the reference:
// i32/u32/u8 truncate toward zero and saturate (NaN -> 0), bool is value != 0 (NaN -> true).
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint KIND = 0;  // 0 f32, 1 i32, 2 u32, 3 u8, 4 bool

layout(set = 0, binding = 0) buffer O { uint ow[]; };
layout(set = 0, binding = 1) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint n;  // elements
  uint v_idx;
} p;

uint convert(float v) {
  if (KIND == 0u) return floatBitsToUint(v);
  if (KIND == 4u) return (floatBitsToUint(v) & 0x7fffffffu) != 0u ? 1u : 0u;
  if (et_isnan(v)) return 0u;
  float t = trunc(v);
  if (KIND == 1u) {
    if (t <= -2147483648.0) return 0x80000000u;
    if (t >= 2147483648.0) return 0x7fffffffu;
    return uint(int(t));
  }
  if (t <= 0.0) return 0u;
  if (KIND == 2u) return t >= 4294967296.0 ? 0xffffffffu : uint(t);
  return t >= 255.0 ? 255u : uint(t);
}

void main() {
  uint w = et_thread();
  uint v = convert(scal[p.v_idx]);
  if (KIND <= 2u) {
    if (w < p.n) ow[w] = v;
    return;
  }
  uint first = 4u * w;
  if (first >= p.n) return;
  uint count = min(4u, p.n - first);
  uint word = v * 0x01010101u;
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
