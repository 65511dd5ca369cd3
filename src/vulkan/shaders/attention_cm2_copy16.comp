// The fp16 copies of q, k and v that cm2/attention_cm2.comp's tensor loads read (its F16_COPIES): one uvec4
// of 8 rounded values per invocation, q then k then v, written into the forward call's pooled scratch at
// the push constants' uvec4 offsets (ops_llama.cpp). Compiled by Debian's glslc, as every kernel outside
// cm2/ is: copies that kernels compiled by glslang 15 (with the Vulkan memory model, shaders/cm2/) had
// written were read as zeros by the tensor loads (thirteenth and eighteenth sessions), while gemm_cm2.comp's
// tensor loads read what glslc's gemm_split.comp writes.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 256) in;
#include "generic_common.glsl"
#include "attention_copy16.glsl"

// The forward's bindings: q 0, k 1, v 2, its pooled scratch 7.
layout(set = 0, binding = 0) readonly buffer Qv { vec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer Kv { vec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer Vv { vec4 v4[]; };
layout(set = 0, binding = 7) writeonly buffer S16 { uvec4 s16[]; };

layout(push_constant) uniform P {
  uint nq8, nk8;       // uvec4s of q, of k (and v)
  uint q16, k16, v16;  // where their copies start, in uvec4s
} p;

void main() {
  const uint i = et_thread();
  if (i < p.nq8) s16[p.q16 + i] = et_round8(q4[2u * i], q4[2u * i + 1u]);
  else if (i < p.nq8 + p.nk8) {
    const uint e = i - p.nq8;
    s16[p.k16 + e] = et_round8(k4[2u * e], k4[2u * e + 1u]);
  } else if (i < p.nq8 + 2u * p.nk8) {
    const uint e = i - p.nq8 - p.nk8;
    s16[p.v16 + e] = et_round8(v4[2u * e], v4[2u * e + 1u]);
  }
}
