// grad_norm = sqrt(sum of x^2 over every element of every input), deterministic, in passes:
//   MODE 0, once per input: workgroup g sums squares of elements [g*CHUNK, (g+1)*CHUNK) of the input at
//     binding 0 in a fixed tree -> part[p.part_offset + g];
//   MODE 1, one workgroup: part[0 .. p.n) summed in a fixed order, norm = sqrt.
// The op has a variable number of inputs, so the encoder rewrites this kernel's binding numbers
// (0 -> input i, 1 -> the scratch buffer, 2 -> the output) in a copy of the SPIR-V for each call shape.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint MODE = 0;
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Part { float part[]; };
layout(set = 0, binding = 2) writeonly buffer O { float norm[]; };

layout(push_constant) uniform P {
  uint n;            // MODE 0: elements of the input; MODE 1: partials
  uint chunk;        // MODE 0: elements per workgroup
  uint part_offset;  // MODE 0: first partial of this input
} p;

void main() {
  uint lid = gl_LocalInvocationID.x;
  if (MODE == 0u) {
    uint g = et_group();
    uint first = g * p.chunk;
    if (first >= p.n) return;  // uniform per workgroup
    uint last = min(first + p.chunk, p.n);
    float s = 0.0;
    for (uint i = first + lid; i < last; i += WG) s += x[i] * x[i];
    s = et_wg_sum(s);
    if (lid == 0u) part[p.part_offset + g] = s;
    return;
  }
  float s = 0.0;
  for (uint i = lid; i < p.n; i += WG) s += part[i];
  s = et_wg_sum(s);
  if (lid == 0u) norm[0] = sqrt(s);
}
