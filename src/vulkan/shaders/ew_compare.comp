// eq/ne/lt/le/gt/ge of an f32 or i32 tensor with a scalar s -> bool. Each invocation writes one whole
// 32-bit word (4 bools), so no two invocations touch the same word. Everything is decided on IEEE bit
// patterns, never with float compares: drivers (NVIDIA) flush denormals to zero in float compares, while
// the reference is exact (a denormal x is != 0). f32 x: a total order on the bits (NaN compares false
// except ne, -0 == +0). i32 x: compared with s exactly (as the reference does in double) via floor(s)
// and whether s has a fraction; |s| < 1 (zeros, denormals) is classified by its bits alone.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint CMP = 0;     // 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge
layout(constant_id = 1) const uint IS_INT = 0;  // x is i32

layout(set = 0, binding = 0) readonly buffer XU { uint xu[]; };
layout(set = 0, binding = 0) readonly buffer XI { int xi[]; };
layout(set = 0, binding = 1) buffer O { uint ow[]; };
layout(set = 0, binding = 2) readonly buffer Scalars { uint scal_bits[]; };

layout(push_constant) uniform P {
  uint n;
  uint s_idx;
} p;

bool bits_nan(uint b) { return (b & 0x7fffffffu) > 0x7f800000u; }

// Monotone map of non-NaN f32 bits onto uint: a < b as reals <=> key(a) < key(b); -0 and +0 share a key.
uint order_key(uint b) {
  if ((b & 0x7fffffffu) == 0u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

bool decide(bool lt, bool eq) {
  if (CMP == 0u) return eq;
  if (CMP == 1u) return !eq;
  if (CMP == 2u) return lt;
  if (CMP == 3u) return lt || eq;
  if (CMP == 4u) return !(lt || eq);
  return !lt;
}

bool cmp_f32(uint vb, uint sb) {
  if (bits_nan(vb) || bits_nan(sb)) return CMP == 1u;
  uint kv = order_key(vb), ks = order_key(sb);
  return decide(kv < ks, kv == ks);
}

// v < s, v == s for an integer v and a non-NaN s (bits sb), exactly.
bool cmp_i32(int v, uint sb) {
  bool lt, eq;
  uint mag = sb & 0x7fffffffu;
  bool neg = (sb & 0x80000000u) != 0u;
  if (mag < 0x3f800000u) {
    // |s| < 1: zero (either sign), a denormal or a small normal; floor(s) is 0 or -1.
    if (mag == 0u) {
      eq = v == 0;
      lt = v < 0;
    } else {
      eq = false;
      lt = neg ? v < 0 : v <= 0;  // s in (-1, 0): v < s <=> v <= -1; s in (0, 1): v < s <=> v <= 0
    }
  } else {
    float s = uintBitsToFloat(sb);  // |s| >= 1 (normal or inf): float arithmetic is exact here
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
  }
  return decide(lt, eq);
}

void main() {
  uint w = et_thread();
  uint first = 4u * w;
  if (first >= p.n) return;
  uint sb = scal_bits[p.s_idx];
  uint count = min(4u, p.n - first);
  uint word = 0u;
  for (uint k = 0u; k < count; ++k) {
    bool r;
    if (IS_INT == 1u) r = bits_nan(sb) ? (CMP == 1u) : cmp_i32(xi[first + k], sb);
    else r = cmp_f32(xu[first + k], sb);
    word |= (r ? 1u : 0u) << (8u * k);
  }
  ow[w] = et_keep_tail(word, count < 4u ? ow[w] : 0u, count);
}
