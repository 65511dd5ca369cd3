// The fp16 / bf16 codec (see include/edgetrain/half.h).
#include "edgetrain/half.h"

#include <cmath>
#include <cstring>

namespace edgetrain {

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN / infinity
  if (ax >= 0x477ff000u) return sign | 0x7c00;                                   // rounds to >= 65520: inf
  if (ax < 0x38800000u) {                                                        // half subnormal or zero
    float a;
    std::memcpy(&a, &ax, 4);
    // The subnormal step is 2^-24; nearbyint rounds half to even in the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(static_cast<double>(a) * 16777216.0));
  }
  uint32_t mant = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return sign | static_cast<uint16_t>(h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: mant * 2^-24, exact in f32
      float f = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity or NaN (payload kept)
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace edgetrain
