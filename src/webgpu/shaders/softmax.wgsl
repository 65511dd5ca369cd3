// Row-wise softmaxes, one workgroup per row (rows folded over a 2-D grid), three passes over the row
// (max, sum, write) with tree reductions in workgroup memory. MODE: 0 softmax, 1 log_softmax,
// 2 softmax_backward (dx = y * (dy - sum(y*dy))), 3 causal_softmax (row t of each [T, S] matrix sees
// columns j <= t + S - T, scaled by the scalar; masked entries are 0).
#include "workgroup_reduce.wgsl"
override MODE: u32 = 0u;
override WG: u32 = 256u;
struct Params { rows: u32, n: u32, T: u32, scale_idx: u32, neg_inf: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> DY: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;
@group(0) @binding(3) var<storage, read> scalars: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let base = row * p.n;
  if (MODE == 2u) {
    var d = 0.0;
    for (var j = li; j < p.n; j += WG) { d = fma(X[base + j], DY[base + j], d); }
    let dotv = wg_sum(d, li);
    for (var j = li; j < p.n; j += WG) { O[base + j] = X[base + j] * (DY[base + j] - dotv); }
    return;
  }
  var scale = 1.0;
  var visible = p.n;
  if (MODE == 3u) {
    scale = scalars[p.scale_idx];
    visible = row % p.T + p.n - p.T + 1u;
  }
  var m = bitcast<f32>(p.neg_inf);
  for (var j = li; j < visible; j += WG) { m = max(m, scale * X[base + j]); }
  m = wg_max(m, li);
  var z = 0.0;
  for (var j = li; j < visible; j += WG) { z += exp(scale * X[base + j] - m); }
  z = wg_sum(z, li);
  if (MODE == 1u) {
    let lse = m + log(z);
    for (var j = li; j < p.n; j += WG) { O[base + j] = X[base + j] - lse; }
    return;
  }
  for (var j = li; j < p.n; j += WG) {
    var v = 0.0;
    if (j < visible) { v = exp(scale * X[base + j] - m) / z; }
    O[base + j] = v;
  }
}
