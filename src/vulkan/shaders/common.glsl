// Helpers shared by the Vulkan compute kernels: folded 2-D grid ids, NaN, W_4X8 nibble access, fp16
// rounding of GEMM operands.
#ifndef EDGETRAIN_COMMON_GLSL
#define EDGETRAIN_COMMON_GLSL

// Linear workgroup id of a grid folded by grid_1d (kernel.h): y * nx + x.
uint linear_group_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

float nan_f32() { return uintBitsToFloat(0x7fc00000u); }

// Code of row n (parity odd_n) at k offset byte_k (0..3) of one W_4X8 word.
uint q4_nibble(uint word, uint byte_k, uint odd_n) { return (word >> (8u * byte_k + 4u * odd_n)) & 0xFu; }
float q4_value(uint code) { return float(int(code) - 8); }

// x rounded to the nearest fp16 value (ties to even) and returned as fp32: the operands of the f16 GEMMs
// (ops.inc). Integer arithmetic on the bits in the fp16 normal range and an exact power-of-two scaling for
// fp16 subnormals (step 2^-24), so every device rounds alike whatever its conversion rounding mode or fp16
// denormal handling. From 65520 up it gives infinity (as the conversion does); NaN stays NaN. It matches
// the CPU's f32_to_f16 (core/half.cpp) bit for bit, NaN payloads aside.
float et_round_f16(float x) {
  uint u = floatBitsToUint(x), a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return x;
  if (a >= 0x477ff000u) return uintBitsToFloat((u & 0x80000000u) | 0x7f800000u);
  if (a >= 0x38800000u) return uintBitsToFloat((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
  return roundEven(x * 16777216.0) * (1.0 / 16777216.0);
}
vec4 et_round_f16(vec4 v) {
  return vec4(et_round_f16(v.x), et_round_f16(v.y), et_round_f16(v.z), et_round_f16(v.w));
}
// The fp16 bits of r, a value et_round_f16 returned (so exactly representable: nothing is rounded here,
// and no conversion instruction's rounding mode or denormal flushing matters).
uint et_f16_bits(float r) {
  uint u = floatBitsToUint(r), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return s | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (a >= 0x38800000u) return s | ((a - 0x38000000u) >> 13);  // rebias the exponent from 127 to 15
  return s | uint(abs(r) * 16777216.0);                        // subnormal: r = mantissa * 2^-24
}

#endif
