// Portable 8-lane float vectors (GCC/Clang vector extensions) and a vectorized exp for the CPU fast
// kernels. The compiler splits 8 lanes into two SSE registers on baseline x86-64 or NEON on Arm; no
// intrinsics, so the code builds on any target. Fixed lane counts also fix the summation order, so
// results never depend on the thread count.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

// Every function here is inline, so the "vector argument changes the ABI" note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace edgetrain::cpu::simd {

typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
constexpr int kLanes = 8;

inline f8 load(const float* p) {
  f8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, f8 v) { std::memcpy(p, &v, sizeof v); }
inline f8 splat(float x) { return f8{} + x; }
inline float hsum(f8 v) {
  // Pairwise, in a fixed order.
  float a = (v[0] + v[4]) + (v[2] + v[6]), b = (v[1] + v[5]) + (v[3] + v[7]);
  return a + b;
}
inline float hmax(f8 v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// exp(x) per lane, within ~2 ulp (Cephes-style range reduction by ln 2 and a degree-6 polynomial).
// exp(NaN) = NaN, exp(x) = +inf for x > 88.72 (the fp32 overflow point), 0 below -87.33 (where the result
// would be subnormal: differs from libm by < 1.2e-38), exp(-inf) = 0.
inline f8 exp(f8 x) {
  const f8 zero = {};
  const f8 inf = splat(std::numeric_limits<float>::infinity());
  const i8 under = x < -87.3365447f;
  const i8 over = x > 88.7228391f;
  x = x > 88.3762626f ? splat(88.3762626f) : x;  // keep 2^k finite in the reconstruction below
  x = x < -87.3365447f ? splat(-87.3365447f) : x;
  const f8 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer (round-half-even)
  f8 k = (x * 1.44269504088896341f + magic) - magic;
  f8 r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  f8 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  i8 ki = __builtin_convertvector(k, i8);
  i8 bits = (ki + 127) << 23;
  f8 res = p * (f8)bits;  // same-size vector cast = bit reinterpretation
  res = under ? zero : res;
  res = over ? inf : res;
  return res;
}

// Scalar form of exp() with the same rounding, for tails.
inline float exp1(float x) { return exp(splat(x))[0]; }

}  // namespace edgetrain::cpu::simd
