// embedding_backward (scatter-add) without atomics, so dw is the same bits every run and equals the
// reference's in-order float sums. MODE:
//   0: zero dw (accumulate = 0), one element per invocation;
//   1: stable sort of token positions by index: rank[i] = #{j: key j < key i, or equal and j < i}, with
//      indices outside this part (dw holds rows first .. first+V-1 of the table) keyed V (last);
//      order[rank[i]] = i into scratch. O(n^2) compares, tiled
//      through shared memory (n = tokens of one batch);
//   2: one invocation per (sorted position s, column d): the first position of each run of equal
//      indices walks its run in token order, dw[v, d] = (dw[v, d] or 0) + dout[i0, d] + dout[i1, d] ...
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint MODE = 0;
#include "generic_common.glsl"

layout(set = 0, binding = 0) readonly buffer DO { float dout[]; };
layout(set = 0, binding = 1) readonly buffer I { int idx[]; };
layout(set = 0, binding = 2) buffer DW { float dw[]; };
layout(set = 0, binding = 4) buffer Order { uint order[]; };

layout(push_constant) uniform P {
  uint n;  // tokens
  uint V;
  uint D;
  uint accumulate;
  uint first;
} p;

shared uint tile[WG];

uint key(int v) { return (v >= 0 && uint(v) >= p.first && uint(v) - p.first < p.V) ? uint(v) - p.first : p.V; }

void main() {
  uint t = et_thread();
  if (MODE == 0u) {
    if (t < p.V * p.D) dw[t] = 0.0;
    return;
  }
  if (MODE == 1u) {
    // every invocation of the workgroup takes part in the tile loads, even past n
    uint ki = t < p.n ? key(idx[t]) : 0u;
    uint rank = 0u;
    for (uint j0 = 0u; j0 < p.n; j0 += WG) {
      uint j = j0 + gl_LocalInvocationID.x;
      tile[gl_LocalInvocationID.x] = j < p.n ? key(idx[j]) : 0xffffffffu;
      barrier();
      uint cnt = min(WG, p.n - j0);
      for (uint q = 0u; q < cnt; ++q) {
        uint kj = tile[q];
        if (kj < ki || (kj == ki && j0 + q < t)) ++rank;
      }
      barrier();
    }
    if (t < p.n) order[rank] = t;
    return;
  }
  if (t >= p.n * p.D) return;
  uint s = t / p.D, d = t % p.D;
  uint v = key(idx[order[s]]);
  if (v >= p.V) return;                                  // tokens of other parts contribute nothing
  if (s > 0u && key(idx[order[s - 1u]]) == v) return;    // not the first of its run
  float acc = p.accumulate != 0u ? dw[v * p.D + d] : 0.0;
  for (uint q = s; q < p.n; ++q) {
    uint i = order[q];
    if (key(idx[i]) != v) break;
    acc += dout[i * p.D + d];
  }
  dw[v * p.D + d] = acc;
}
