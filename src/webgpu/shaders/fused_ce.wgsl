// Fused cross-entropy, one workgroup per row (rows folded over a 2-D grid): each lane streams a strided
// slice of the row once with an online softmax (running max m and sum l of exp(x - m)), the lanes merge
// (m, l) pairs in a tree, then a second pass writes dlogits = (softmax - onehot) / n_valid. Lane 0 writes
// the row's loss term to `partial`; grad_norm.wgsl (a plain sum) adds them. Labels < 0 ignore the row
// (zeros), labels >= V give a NaN row and loss. Parameters, bindings and IN_PLACE: fused_ce_io.wgsl.
#include "fused_ce_io.wgsl"
override WG: u32 = 256u;
var<workgroup> wm: array<f32, WG>;
var<workgroup> wl: array<f32, WG>;
var<workgroup> xy: f32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= p.R) { return; }  // uniform per workgroup
  let base = r * p.V;
  let y = labels[r];
  let inv_n = 1.0 / scalars[p.n_valid_idx];
  if (label_outside(r, base, y, li)) { return; }
  var m = -3.4e38;
  var l = 0.0;
  for (var j = li; j < p.V; j += WG) {
    let x = ld(base + j);
    if (x > m) {
      l = l * exp(m - x) + 1.0;
      m = x;
    } else {
      l += exp(x - m);
    }
  }
  wm[li] = m;
  wl[li] = l;
  if (li == 0u) { xy = ld(base + u32(y)); }
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (li < s) {
      let ma = wm[li];
      let mb = wm[li + s];
      let mx = max(ma, mb);
      wl[li] = wl[li] * exp(ma - mx) + wl[li + s] * exp(mb - mx);
      wm[li] = mx;
    }
    workgroupBarrier();
  }
  let lse = wm[0] + log(wl[0]);
  let xt = xy;
  storageBarrier();  // every read of x[y] happens before any lane overwrites it in place
  workgroupBarrier();
  for (var j = li; j < p.V; j += WG) {
    var v = exp(ld(base + j) - lse);
    if (j == u32(y)) { v -= 1.0; }
    dlogits[base + j] = v * inv_n;
  }
  if (li == 0u) { partial[r] = (lse - xt) * inv_n; }
}
