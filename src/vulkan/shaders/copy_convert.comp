// dim_order_copy: contiguous copy with a dtype conversion among f32 / i32 / bool, or a plain copy of any
// dtype (SRC == DST: 32-bit words). One invocation per output word: one element of a 4-byte output, four
// of a 1-byte output (so bool writes never race), the tail word keeps bytes past the tensor.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

// dtype kinds: 0 f32, 1 i32, 2 one byte per element (bool for conversions, any 1-byte dtype for copies)
layout(constant_id = 0) const uint SRC = 0;
layout(constant_id = 1) const uint DST = 0;

layout(set = 0, binding = 0) readonly buffer X { uint xw[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };

layout(push_constant) uniform P {
  uint n;  // elements
} p;

// f32 truncated toward zero into i32; NaN -> 0, out of range saturates.
int f32_to_i32(float v) {
  if (et_isnan(v)) return 0;
  float t = trunc(v);
  if (t <= -2147483648.0) return int(0x80000000u);
  if (t >= 2147483648.0) return 0x7fffffff;
  return int(t);
}

uint src_byte(uint e) { return et_byte(xw[e >> 2], e & 3u); }

// Element e of the source as the destination's 32-bit pattern (DST f32 or i32).
uint to_word(uint e) {
  if (SRC == DST) return xw[e];
  if (SRC == 2u) {
    bool b = src_byte(e) != 0u;
    return DST == 0u ? floatBitsToUint(b ? 1.0 : 0.0) : (b ? 1u : 0u);
  }
  if (SRC == 1u) return floatBitsToUint(float(int(xw[e])));  // i32 -> f32, round to nearest
  return uint(f32_to_i32(uintBitsToFloat(xw[e])));           // f32 -> i32
}

// Element e of the source as a bool byte (DST one byte).
uint to_byte(uint e) {
  if (SRC == 2u) return src_byte(e);  // same-dtype byte copy
  uint bits = xw[e];
  if (SRC == 0u) bits &= 0x7fffffffu;  // -0.0 is false, NaN is true
  return bits != 0u ? 1u : 0u;
}

void main() {
  uint w = et_thread();
  if (DST != 2u) {
    if (w < p.n) ow[w] = to_word(w);
    return;
  }
  uint first = 4u * w;
  if (first >= p.n) return;
  uint count = min(4u, p.n - first);
  if (SRC == 2u && count == 4u) {
    ow[w] = xw[w];
    return;
  }
  uint word = 0u;
  for (uint k = 0u; k < count; ++k) word |= to_byte(first + k) << (8u * k);
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
