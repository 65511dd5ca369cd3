// grad_norm = sqrt(sum of x^2 over every element of every input), deterministic, in passes:
//   MODE 0, once per group of up to 8 inputs (bindings 0..7): workgroup g of the dispatch takes input j,
//     the last with p.first[j] <= g, and sums the squares of its elements [c*CHUNK, (c+1)*CHUNK),
//     c = g - p.first[j], in a fixed tree -> part[p.part_offset + g]. One dispatch per input put a barrier
//     between every two of them (they write one scratch buffer): 0.84 ms of the base step's update;
//   MODE 1, one workgroup: part[0 .. p.n[0]) summed in a fixed order, norm = sqrt.
// The op has a variable number of inputs, so the encoder rewrites this kernel's binding numbers
// (0..7 -> a group's inputs, 8 -> the scratch buffer, 9 -> the output) in a copy of the SPIR-V for each
// call shape and group.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint CHUNK = 4096;  // elements per workgroup of MODE 0
#include "generic_common.glsl"
#include "et_reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X0 { float x0[]; };
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 2) readonly buffer X2 { float x2[]; };
layout(set = 0, binding = 3) readonly buffer X3 { float x3[]; };
layout(set = 0, binding = 4) readonly buffer X4 { float x4[]; };
layout(set = 0, binding = 5) readonly buffer X5 { float x5[]; };
layout(set = 0, binding = 6) readonly buffer X6 { float x6[]; };
layout(set = 0, binding = 7) readonly buffer X7 { float x7[]; };
layout(set = 0, binding = 8) buffer Part { float part[]; };
layout(set = 0, binding = 9) writeonly buffer O { float norm[]; };

layout(push_constant) uniform P {
  uint part_offset;  // MODE 0: the partial of this dispatch's workgroup 0
  uint inputs;       // MODE 0: inputs in this group (1..8)
  uint n[8];         // MODE 0: elements of each input; MODE 1: n[0] partials
  uint first[8];     // MODE 0: the first workgroup of each input
} p;

void main() {
  uint lid = gl_LocalInvocationID.x;
  if (MODE == 0u) {
    const uint g = et_group();
    uint j = 0u;
    for (uint t = 1u; t < p.inputs; ++t)
      if (g >= p.first[t]) j = t;
    const uint c = g - p.first[j];
    const uint first = c * CHUNK;
    if (first >= p.n[j]) return;  // uniform per workgroup (past the grid's last input)
    const uint last = min(first + CHUNK, p.n[j]);
    float s = 0.0;
#define SQUARES(buf) for (uint i = first + lid; i < last; i += WG) s += buf[i] * buf[i];
    switch (j) {
      case 0u: SQUARES(x0) break;
      case 1u: SQUARES(x1) break;
      case 2u: SQUARES(x2) break;
      case 3u: SQUARES(x3) break;
      case 4u: SQUARES(x4) break;
      case 5u: SQUARES(x5) break;
      case 6u: SQUARES(x6) break;
      default: SQUARES(x7) break;
    }
    s = et_wg_sum(s);
    if (lid == 0u) part[p.part_offset + g] = s;
    return;
  }
  float s = 0.0;
  for (uint i = lid; i < p.n[0]; i += WG) s += part[i];
  s = et_wg_sum(s);
  if (lid == 0u) norm[0] = sqrt(s);
}
