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
// The fp16 bits of et_round_f16(x), computed from x's bits without branches (no conversion instruction, so
// no rounding mode or denormal flushing matters). The operand stagings (gemm_split.comp) ran at ~0.5 G
// values/us on an H200 whatever their bytes per value — bound by et_f16_bits(et_round_f16(x))'s branches;
// with this one step they take 21-24% less time (nineteenth session, docs/PERFORMANCE.md). Normal range:
// the 13 dropped bits rounded to nearest even, the exponent rebiased; subnormal: et_round_f16's exact
// scaling; from 65520 up inf; NaN a quiet NaN.
uint et_f16_rne_bits(float x) {
  const uint u = floatBitsToUint(x), a = u & 0x7fffffffu;
  uint h = ((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - 0x1c000u;
  h = a < 0x38800000u ? uint(roundEven(uintBitsToFloat(a) * 16777216.0)) : h;
  h = a >= 0x477ff000u ? (a > 0x7f800000u ? 0x7e00u : 0x7c00u) : h;
  return ((u >> 16) & 0x8000u) | h;
}

#endif
