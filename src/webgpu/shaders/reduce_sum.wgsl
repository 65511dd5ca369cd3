// sum / mean over adjacent dims: x viewed as [outer, reduced, inner], out [outer, inner]. One workgroup
// per output (folded grid) whose lanes stride over the reduced axis and reduce in a tree. MEAN divides by
// the reduced count (0/0 = NaN for an empty reduction, as the reference).
#include "workgroup_reduce.wgsl"
override MEAN: bool = false;
override WG: u32 = 64u;
struct Params { outs: u32, reduced: u32, inner: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read_write> O: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let o = wid.y * nwg.x + wid.x;
  if (o >= p.outs) { return; }
  let a = o / p.inner;
  let b = o % p.inner;
  var acc = 0.0;
  for (var k = li; k < p.reduced; k += WG) { acc += X[(a * p.reduced + k) * p.inner + b]; }
  var r = wg_sum(acc, li);
  if (li == 0u) {
    if (MEAN) { r = r / f32(p.reduced); }
    O[o] = r;
  }
}
