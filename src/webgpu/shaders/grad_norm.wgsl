// grad_norm's last pass (and fused_ce's loss sum): each workgroup sums one chunk of `chunk` floats of src
// into out[out_idx + w], w its linear workgroup id; a fixed-order tree within the workgroup and fixed chunks,
// so results are deterministic. grad_norm: one workgroup sums the partial sums of squares that
// grad_norm_squares.wgsl wrote and writes the root (ROOT). fused_ce's loss is the plain sum of its row terms
// (one workgroup, chunk = n); fused_ce_part's too, ACCUMULATE adding the old value of out (the previous
// parts' loss). A NaN anywhere gives NaN, tested on the bits so no
// fast-math assumption can drop it.
#include "workgroup_reduce.wgsl"
override WG: u32 = 256u;
override ROOT: bool = false;
override ACCUMULATE: bool = false;
struct Params { n: u32, nan_bits: u32, out_idx: u32, chunk: u32 }  // nan_bits: WGSL has no NaN constant
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> nan_seen: atomic<u32>;

fn is_nan(x: f32) -> bool {
  let b = bitcast<u32>(x);
  return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = wid.y * nwg.x + wid.x;
  let begin = w * p.chunk;
  if (begin >= p.n && w > 0u) { return; }  // the whole workgroup: past the last chunk
  let end = min(p.n, begin + p.chunk);
  var acc = 0.0;
  var bad = false;
  for (var i = begin + li; i < end; i += WG) {
    let x = src[i];
    if (is_nan(x)) { bad = true; }
    acc += x;
  }
  if (bad) { atomicStore(&nan_seen, 1u); }
  var r = wg_sum(acc, li);
  let any_nan = atomicLoad(&nan_seen);
  if (li == 0u) {
    if (ROOT) { r = sqrt(r); }
    var nan_in = any_nan != 0u;
    if (ACCUMULATE) {
      let old = out[p.out_idx + w];
      nan_in = nan_in || is_nan(old);
      r += old;
    }
    if (nan_in) { r = bitcast<f32>(p.nan_bits); }
    out[p.out_idx + w] = r;
  }
}
