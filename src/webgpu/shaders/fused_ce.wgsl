// Fused cross-entropy, one workgroup per row (rows folded over a 2-D grid): each lane streams a strided
// slice of the row once with an online softmax (running max m and sum l of exp(x - m)), the lanes merge
// (m, l) pairs in a tree, then a second pass writes dlogits = (softmax - onehot) / n_valid. Lane 0 writes
// the row's loss term to `partial`; grad_norm.wgsl (a plain sum) adds them. Labels < 0 ignore the row
// (zeros), labels >= V give a NaN row and loss. Parameters, bindings and IN_PLACE: fused_ce_io.wgsl.
#include "fused_ce_io.wgsl"
#include "online_softmax.wgsl"
override WG: u32 = 256u;
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
  var s = online_empty();
  for (var j = li; j < p.V; j += WG) { s = online_add(s, ld(base + j)); }
  if (li == 0u) { xy = ld(base + u32(y)); }
  let row = wg_online_merge(s, li);  // its barriers also order the read of x[y] before the xt below
  let lse = row.x + log(row.y);
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
