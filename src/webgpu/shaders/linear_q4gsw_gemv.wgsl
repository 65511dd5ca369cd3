// q4gsw forward for one row (M = 1, decoding): y[n] = sum_k x[k] W[n,k] (+ bias[n]). One workgroup per
// 8 outputs (one n8 column of W_4X8 blocks); its WG threads stride over the k4 blocks, each reading one
// 16-byte block (4 k x 8 n codes) at a time, then reduce their 8 partial sums in workgroup memory.
// F16 (mixed precision): x and each weight (code - 8) * scale rounded to fp16, as every f16 kernel takes
// them, so the scale is applied per weight instead of per group sum.
#include "f16_round.wgsl"
override WG: u32 = 64u;
override F16: bool = false;
struct Params { N: u32, K: u32, gs: u32, N8: u32, K4: u32, has_bias: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> S: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<f32, 8 * WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let n8 = wid.y * nwg.x + wid.x;
  if (n8 >= p.N8) { return; }  // uniform per workgroup
  var acc: array<f32, 8>;
  for (var t = 0u; t < 8u; t++) { acc[t] = 0.0; }
  for (var k4 = li; k4 < p.K4; k4 += WG) {
    let g = (k4 * 4u) / p.gs;  // group_size % 4 == 0: one group per k4 block
    for (var jw = 0u; jw < 4u; jw++) {
      let word = W[4u * (k4 * p.N8 + n8) + jw];
      for (var h = 0u; h < 2u; h++) {
        let n = n8 * 8u + 2u * jw + h;
        if (n >= p.N) { continue; }
        let sc = S[g * p.N + n];
        var s = 0.0;
        for (var b = 0u; b < 4u; b++) {
          let k = k4 * 4u + b;
          if (k < p.K) {
            let q = f32(i32((word >> (8u * b + 4u * h)) & 0xFu) - 8);
            if (F16) { s = fma(round_f16(X[k]), round_f16(q * sc), s); } else { s = fma(X[k], q, s); }
          }
        }
        if (F16) { acc[2u * jw + h] += s; } else { acc[2u * jw + h] = fma(s, sc, acc[2u * jw + h]); }
      }
    }
  }
  for (var t = 0u; t < 8u; t++) { red[t * WG + li] = acc[t]; }
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (li < stride) {
      for (var t = 0u; t < 8u; t++) { red[t * WG + li] += red[t * WG + li + stride]; }
    }
    workgroupBarrier();
  }
  if (li < 8u) {
    let n = n8 * 8u + li;
    if (n < p.N) {
      var r = red[li * WG];
      if (p.has_bias != 0u) { r += bias[n]; }
      Y[n] = r;
    }
  }
}
