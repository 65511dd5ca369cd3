// eq/ne/lt/le/gt/ge of an f32 or i32 tensor with a scalar s -> bool. Each invocation writes one whole
// 32-bit word (4 bools), so no two invocations touch the same word. An i32 x is compared with the f32 s
// exactly (as the reference does in double): via floor(s) and whether s has a fraction.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint CMP = 0;     // 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge
layout(constant_id = 1) const uint IS_INT = 0;  // x is i32

layout(set = 0, binding = 0) readonly buffer XF { float xf[]; };
layout(set = 0, binding = 0) readonly buffer XI { int xi[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint n;
  uint s_idx;
} p;

bool cmp_f32(float v, float s) {
  if (et_isnan(v) || et_isnan(s)) return CMP == 1u;
  if (CMP == 0u) return v == s;
  if (CMP == 1u) return !(v == s);
  if (CMP == 2u) return v < s;
  if (CMP == 3u) return v <= s;
  if (CMP == 4u) return v > s;
  return v >= s;
}

// v < s, v == s for an integer v and a non-NaN float s, exactly.
bool cmp_i32(int v, float s) {
  bool lt, eq;
  if (s >= 2147483648.0) {
    lt = true;
    eq = false;
  } else if (s < -2147483648.0) {
    lt = false;
    eq = false;
  } else {
    float fl = floor(s);  // exact, and representable as int in this range
    int f = int(fl);
    bool frac = fl != s;
    eq = !frac && v == f;
    lt = frac ? v <= f : v < f;
  }
  if (CMP == 0u) return eq;
  if (CMP == 1u) return !eq;
  if (CMP == 2u) return lt;
  if (CMP == 3u) return lt || eq;
  if (CMP == 4u) return !(lt || eq);
  return !lt;
}

void main() {
  uint w = et_thread();
  uint first = 4u * w;
  if (first >= p.n) return;
  float s = scal[p.s_idx];
  uint count = min(4u, p.n - first);
  uint word = 0u;
  for (uint k = 0u; k < count; ++k) {
    bool r;
    if (IS_INT == 1u) r = et_isnan(s) ? (CMP == 1u) : cmp_i32(xi[first + k], s);
    else r = cmp_f32(xf[first + k], s);
    word |= (r ? 1u : 0u) << (8u * k);
  }
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
