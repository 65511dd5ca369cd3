// The fp16 copies of q, dout, k and v that attention_coop_backward.comp's B16 tiles read (ops_llama.cpp,
// AttnCopies): one uvec4 of 8 rounded values per invocation, the four tensors one after another, written
// into the pooled scratch at the push constants' uvec4 offsets. A kernel of its own: as a mode of the
// backward kernel (until the nineteenth session) it took 135 us for 120 MB at B4 H32 T1024 D64 on an H200,
// about a quarter of the bandwidth — that kernel's registers and 36 KiB of workgroup memory held its
// occupancy down (docs/PERFORMANCE.md).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 256) in;
#include "generic_common.glsl"
#include "attention_copy16.glsl"  // et_round8: as the backward's fp32 tile loads round (ET_PUT_SLOT)

// The backward's bindings: dout 0, q 1, k 2, v 3, its pooled scratch 11.
layout(set = 0, binding = 0) readonly buffer DOv { vec4 dout4[]; };
layout(set = 0, binding = 1) readonly buffer Qv { vec4 q4[]; };
layout(set = 0, binding = 2) readonly buffer Kv { vec4 k4[]; };
layout(set = 0, binding = 3) readonly buffer Vv { vec4 v4[]; };
layout(set = 0, binding = 11) writeonly buffer S16 { uvec4 s16[]; };

layout(push_constant) uniform P {
  uint nq8, nk8;            // uvec4s of q (and of dout), of k (and of v)
  uint q16, d16, k16, v16;  // where their copies start, in uvec4s
} p;


void main() {
  const uint i = et_thread();
  if (i < p.nq8) s16[p.q16 + i] = et_round8(q4[2u * i], q4[2u * i + 1u]);
  else if (i < 2u * p.nq8) {
    const uint e = i - p.nq8;
    s16[p.d16 + e] = et_round8(dout4[2u * e], dout4[2u * e + 1u]);
  } else if (i < 2u * p.nq8 + p.nk8) {
    const uint e = i - 2u * p.nq8;
    s16[p.k16 + e] = et_round8(k4[2u * e], k4[2u * e + 1u]);
  } else if (i < 2u * p.nq8 + 2u * p.nk8) {
    const uint e = i - 2u * p.nq8 - p.nk8;
    s16[p.v16 + e] = et_round8(v4[2u * e], v4[2u * e + 1u]);
  }
}
