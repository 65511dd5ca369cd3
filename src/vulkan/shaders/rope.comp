// rope / rope_backward on x [B, T, H, D] (or [T, H, D]): pair i = (x[2i], x[2i+1]) at position
// p = t + pos_offset rotates by a = ±p * theta^(-2i/D). One invocation per (b, t, i) computes the angle once
// and rotates that pair in all H heads.
// The reference computes a in double; fp32 exp2/log2 would be off by p * 1e-6 rad (visible at positions of
// a few hundred), so the angle is built in float-float (hi + lo, ~44 bits): theta^(-1/n) (n = D/2) by two
// Newton steps on b^n * theta = 1, then b^i, times p, reduced by pi/2 in float-float, and sin/cos of the
// reduced angle from short polynomials (drivers' sin/cos are only specified to 2^-11 absolute error).
// With the freqs input (HAS_FREQS) the pair's frequency is that fp32 value, exactly, instead of theta^(-i/n).
// With the pos input (HAS_POS, packed samples) the position is pos[b, t] + pos_offset instead of t +
// pos_offset (exact for |pos| < 2^24, as float(t) is for t).
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "generic_common.glsl"

layout(constant_id = 0) const uint BACKWARD = 0;   // 1: rotate by -a
layout(constant_id = 1) const uint HAS_FREQS = 0;  // 1: binding 1 holds each pair's frequency
layout(constant_id = 2) const uint HAS_POS = 0;    // 1: binding 2 holds each token's position

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Freqs { float freqs[]; };  // a dummy when HAS_FREQS = 0
layout(set = 0, binding = 2) readonly buffer Pos { int tok_pos[]; };        // [B*T], a dummy when HAS_POS = 0
layout(set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(set = 0, binding = 4) readonly buffer Scalars { float scal[]; };

layout(push_constant) uniform P {
  uint n;  // B * T * D/2 invocations
  uint T, H, D;
  uint theta_idx, pos_idx;
} p;

// ---- float-float arithmetic; `precise` forbids contraction and reassociation, which would break it ----
vec2 ff_two_sum(float a, float b) {
  precise float s = a + b;
  precise float bb = s - a;
  precise float e = (a - (s - bb)) + (b - bb);
  return vec2(s, e);
}
vec2 ff_fast(float a, float b) {  // |a| >= |b|
  precise float s = a + b;
  precise float e = b - (s - a);
  return vec2(s, e);
}
// Veltkamp split and Dekker's exact product: no reliance on a fused fma (some drivers lower fma to a
// separate multiply and add).
vec2 ff_split(float a) {
  precise float c = 4097.0 * a;
  precise float hi = c - (c - a);
  precise float lo = a - hi;
  return vec2(hi, lo);
}
vec2 ff_mul(vec2 a, vec2 b) {
  precise float h = a.x * b.x;
  vec2 sa = ff_split(a.x), sb = ff_split(b.x);
  precise float l = ((sa.x * sb.x - h) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
  precise float l2 = l + (a.x * b.y + a.y * b.x);
  return ff_fast(h, l2);
}
vec2 ff_add(vec2 a, vec2 b) {
  vec2 s = ff_two_sum(a.x, b.x);
  precise float l = s.y + (a.y + b.y);
  return ff_fast(s.x, l);
}
vec2 ff_pow(vec2 b, uint e) {
  vec2 r = vec2(1.0, 0.0);
  while (e != 0u) {
    if ((e & 1u) != 0u) r = ff_mul(r, b);
    b = ff_mul(b, b);
    e >>= 1;
  }
  return r;
}

// theta^(-1/n) in float-float.
vec2 inv_root(float theta, uint n) {
  vec2 b = vec2(exp2(-log2(theta) / float(n)), 0.0);
  for (int it = 0; it < 2; ++it) {
    vec2 r = ff_add(ff_mul(ff_pow(b, n), vec2(theta, 0.0)), vec2(-1.0, 0.0));  // b^n theta - 1
    precise float c = -(b.x * (r.x + r.y) / float(n));
    b = ff_add(b, vec2(c, 0.0));
  }
  return b;
}

// sin and cos of |s| <= ~pi/4 (Taylor to s^9 / s^10; truncation < 2e-10).
vec2 sincos_small(float s) {
  float z = s * s;
  float sn = s + s * z * (-1.0 / 6.0 + z * (1.0 / 120.0 + z * (-1.0 / 5040.0 + z * (1.0 / 362880.0))));
  float cs = 1.0 + z * (-0.5 + z * (1.0 / 24.0 + z * (-1.0 / 720.0 + z * (1.0 / 40320.0 + z * (-1.0 / 3628800.0)))));
  return vec2(sn, cs);
}

void main() {
  uint q = et_thread();
  if (q >= p.n) return;
  uint half_d = p.D / 2u;
  uint i = q % half_d, bt = q / half_d, t = bt % p.T;
  float theta = scal[p.theta_idx];
  vec2 at = ff_two_sum(HAS_POS == 1u ? float(tok_pos[bt]) : float(t), scal[p.pos_idx]);
  vec2 freq = HAS_FREQS == 1u ? vec2(freqs[i], 0.0)
                              : (i == 0u ? vec2(1.0, 0.0) : ff_pow(inv_root(theta, half_d), i));
  vec2 a = ff_mul(at, freq);
  if (BACKWARD == 1u) a = -a;
  // a = k * pi/2 + r, |r| <= pi/4 (+ rounding)
  const vec2 PIO2 = vec2(1.57079637050628662109375, -4.37113900018624283e-8);
  float k = round(a.x * 0.636619772367581343);
  vec2 kp = ff_mul(vec2(k, 0.0), PIO2);
  vec2 r = ff_add(a, -kp);
  vec2 sc = sincos_small(r.x + r.y);
  uint quad = uint(int(k)) & 3u;
  float sn = sc.x, cs = sc.y;
  if (quad == 1u) { sn = sc.y; cs = -sc.x; }
  else if (quad == 2u) { sn = -sc.x; cs = -sc.y; }
  else if (quad == 3u) { sn = -sc.y; cs = sc.x; }
  uint base = bt * p.H * p.D + 2u * i;
  for (uint h = 0u; h < p.H; ++h, base += p.D) {
    float x0 = x[base], x1 = x[base + 1u];
    y[base] = x0 * cs - x1 * sn;
    y[base + 1u] = x0 * sn + x1 * cs;
  }
}
