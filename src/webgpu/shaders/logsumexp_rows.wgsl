// logsumexp_rows: one workgroup per row (rows folded over a 2-D grid). Lanes stream a strided slice once
// with an online softmax (running max m, sum l of exp(x - m)), merge (m, l) pairs in a tree, and lane 0
// writes lse = m + log(l), merged with the row's old lse when accumulating (one more term, exp(lse_old),
// scaled by the larger maximum): one call per vocabulary part gives the whole row's.
#include "online_softmax.wgsl"
override WG: u32 = 256u;
struct Params { R: u32, V: u32, accumulate: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

fn is_nan(v: f32) -> bool {
  let b = bitcast<u32>(v);
  return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= p.R) { return; }  // uniform per workgroup
  let base = r * p.V;
  var s = online_empty();
  for (var j = li; j < p.V; j += WG) { s = online_add(s, x[base + j]); }
  let row = wg_online_merge(s, li);
  if (li != 0u) { return; }
  let mu = row.x;
  let z = row.y;
  var v = mu + log(z);
  if (p.accumulate != 0u) {
    let old = lse[r];
    if (is_nan(old)) {
      v = old;
    } else if (bitcast<u32>(old) != 0xff800000u) {  // an old -inf adds nothing
      let mm = max(mu, old);
      v = mm + log(z * exp(mu - mm) + exp(old - mm));
    }
  }
  lse[r] = v;
}
