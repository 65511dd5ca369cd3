// RMSNorm forward and the input gradient of its backward, one workgroup per row (rows folded over a 2-D
// grid). BACKWARD = false: rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd * w. BACKWARD = true (inputs dy,
// x, w, rstd): dx = r * (g - xh * mean(g * xh)) with g = dy * w, xh = x * r. The weight gradient is
// rms_norm_dw.wgsl.
#include "workgroup_reduce.wgsl"
override BACKWARD: bool = false;
override WG: u32 = 256u;
struct Params { rows: u32, D: u32, eps_idx: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> X: array<f32>;      // x (forward) / x (backward)
@group(0) @binding(1) var<storage, read> W: array<f32>;
@group(0) @binding(2) var<storage, read> DY: array<f32>;     // backward: dy; forward: dummy
@group(0) @binding(3) var<storage, read> RS: array<f32>;     // backward: rstd; forward: dummy
@group(0) @binding(4) var<storage, read_write> Y: array<f32>; // y / dx
@group(0) @binding(5) var<storage, read_write> R: array<f32>; // forward: rstd; backward: unused scratch
@group(0) @binding(6) var<storage, read> scalars: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let base = row * p.D;
  var acc = 0.0;
  var r = 0.0;
  if (BACKWARD) {
    r = RS[row];
    for (var k = li; k < p.D; k += WG) { acc = fma(DY[base + k] * W[k], X[base + k] * r, acc); }
  } else {
    for (var k = li; k < p.D; k += WG) { acc = fma(X[base + k], X[base + k], acc); }
  }
  let total = wg_sum(acc, li);
  if (BACKWARD) {
    let mean_gx = total / f32(p.D);
    for (var k = li; k < p.D; k += WG) {
      let g = DY[base + k] * W[k];
      let xh = X[base + k] * r;
      Y[base + k] = r * (g - xh * mean_gx);
    }
  } else {
    let rs = 1.0 / sqrt(total / f32(p.D) + scalars[p.eps_idx]);
    if (li == 0u) { R[row] = rs; }
    for (var k = li; k < p.D; k += WG) { Y[base + k] = X[base + k] * rs * W[k]; }
  }
}
