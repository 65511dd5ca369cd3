// Portable 4-lane float vectors (GCC/Clang vector extensions) and a vectorized exp for the CPU fast
// kernels. 16 bytes is native on baseline x86-64 (SSE2) and on Arm (NEON), so compares and selects map to
// single instructions (wider vectors get scalarized compares on baseline x86-64: measured 10x slower).
// No intrinsics, so the code builds on any target. Fixed lane counts also fix the summation order, so
// results never depend on the thread count.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace edgetrain::cpu::simd {

typedef float vf __attribute__((vector_size(16)));
typedef int32_t vi __attribute__((vector_size(16)));
constexpr int kLanes = 4;

inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
inline vf splat(float x) { return vf{} + x; }
inline float hsum(vf v) {
  return (v[0] + v[2]) + (v[1] + v[3]);  // pairwise, in a fixed order
}
inline float hmax(vf v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// exp(x) per lane, within ~2 ulp (Cephes-style range reduction by ln 2 and a degree-6 polynomial).
// exp(NaN) = NaN, exp(x) = +inf for x > 88.72 (the fp32 overflow point), 0 below -87.33 (where the result
// would be subnormal: differs from libm by < 1.2e-38), exp(-inf) = 0.
inline vf exp(vf x) {
  const vf zero = {};
  const vf inf = splat(std::numeric_limits<float>::infinity());
  const vi under = x < -87.3365447f;
  const vi over = x > 88.7228391f;
  x = x > 88.3762626f ? splat(88.3762626f) : x;  // keep 2^k finite in the reconstruction below
  x = x < -87.3365447f ? splat(-87.3365447f) : x;
  const vf magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer (round-half-even)
  vf k = (x * 1.44269504088896341f + magic) - magic;
  vf r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  vi ki = __builtin_convertvector(k, vi);
  vi bits = (ki + 127) << 23;
  vf res = p * (vf)bits;  // same-size vector cast = bit reinterpretation
  res = under ? zero : res;
  res = over ? inf : res;
  return res;
}

// Correctly rounded square root per lane (bit-identical to std::sqrt).
inline vf sqrt(vf v) {
#if defined(__SSE__)
  return __builtin_ia32_sqrtps(v);
#else
  for (int i = 0; i < kLanes; ++i) v[i] = __builtin_sqrtf(v[i]);
  return v;
#endif
}

// Scalar form of exp() with the same rounding, for tails.
inline float exp1(float x) { return exp(splat(x))[0]; }

}  // namespace edgetrain::cpu::simd
