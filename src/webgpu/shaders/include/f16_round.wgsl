// x rounded to the nearest fp16 value (ties to even) and returned as f32: the operands of the f16 GEMMs
// (ops.inc), the twin of et_round_f16 in src/vulkan/shaders/common.glsl. Integer arithmetic on the bits in
// the fp16 normal range and an exact power-of-two scaling for fp16 subnormals (step 2^-24): no f16 type
// (shader-f16) is needed, and no conversion's rounding mode matters. From 65520 up it gives infinity.
fn round_f16(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  let a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) { return x; }
  if (a >= 0x477ff000u) { return bitcast<f32>((u & 0x80000000u) | 0x7f800000u); }
  if (a >= 0x38800000u) { return bitcast<f32>((u + 0xfffu + ((u >> 13u) & 1u)) & 0xffffe000u); }
  return round(x * 16777216.0) * (1.0 / 16777216.0);
}
