// RMSNorm weight gradient: dw[k] (+)= sum_m dy[m,k] * x[m,k] * rstd[m]. One workgroup per column k
// (folded grid); its lanes stride over the rows and reduce in a tree.
#include "workgroup_reduce.wgsl"
override WG: u32 = 64u;
struct Params { rows: u32, D: u32, accumulate: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> DY: array<f32>;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> RS: array<f32>;
@group(0) @binding(3) var<storage, read_write> DW: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let k = wid.y * nwg.x + wid.x;
  if (k >= p.D) { return; }
  var acc = 0.0;
  for (var m = li; m < p.rows; m += WG) { acc = fma(DY[m * p.D + k], X[m * p.D + k] * RS[m], acc); }
  var r = wg_sum(acc, li);
  if (li == 0u) {
    if (p.accumulate != 0u) { r += DW[k]; }
    DW[k] = r;
  }
}
