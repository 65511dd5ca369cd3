// Eight fp32 values rounded to fp16 in one uvec4, as the attention kernels round their fp16 operands (the
// conversion float16_t() does): the copies that attention_coop_copy16.comp and attention_cm2_copy16.comp make.
// Needs GL_EXT_shader_explicit_arithmetic_types_float16.
uvec4 et_round8(vec4 a, vec4 b) {
  return uvec4(packFloat2x16(f16vec2(a.xy)), packFloat2x16(f16vec2(a.zw)), packFloat2x16(f16vec2(b.xy)),
               packFloat2x16(f16vec2(b.zw)));
}
